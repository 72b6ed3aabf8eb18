// The audit log's CSV export, with its signed manifest one click away. A CSV has no room
// for a trailer, so its manifest is a sidecar the server keeps once the download has
// finished (X-Audit-Export-Id names it). The script downloads the CSV itself, then offers
// the manifest beside the button. Without the script the link downloads the CSV and the
// manifest is listed under "Recent exports" after a reload.

const link = document.getElementById("export-csv");
const offer = document.getElementById("csv-manifest");

function fileName(response, fallback) {
  const found = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
  return found ? found[1] : fallback;
}

function save(blob, name) {
  const url = URL.createObjectURL(blob);
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.download = name;
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

if (link && offer) {
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    const status = offer.querySelector(".csv-manifest-status");
    const manifest = offer.querySelector("a");
    offer.hidden = false;
    manifest.hidden = true;
    status.textContent = "Exporting…";
    try {
      const response = await fetch(link.href, { credentials: "same-origin" });
      if (!response.ok) { status.textContent = "The export was refused (" + response.status + ")."; return; }
      const name = fileName(response, "audit-export.csv");
      save(await response.blob(), name);
      const id = response.headers.get("X-Audit-Export-Id");
      if (!id) { status.textContent = "Downloaded " + name + "."; return; }
      manifest.href = "/audit/export.csv.manifest?export_id=" + encodeURIComponent(id);
      manifest.download = name + ".manifest.json";
      manifest.hidden = false;
      status.textContent = "Downloaded " + name + ". Its signed manifest:";
    } catch (error) {
      status.textContent = "Network problem: the export did not finish.";
    }
  });
}
