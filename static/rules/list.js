// Rule list: reorder rows with the arrows (saved as ONE policy version with a note),
// and enable/disable a rule with a note. Both are plain form posts (the server
// answers with a redirect and a flash), so this module sends nothing itself.
// No inline script: CSP allows only our files.

const table = document.getElementById("rules-table");
if (!table) throw new Error("list.js runs on the rule list only: it has no #rules-table");
const body = table.tBodies[0];
const orderInput = document.getElementById("order-input");
const bar = document.getElementById("reorder-bar");

const names = () => Array.from(body.querySelectorAll("tr[data-rule]"), (row) => row.dataset.rule);
const original = names().join(",");

function showToggleForm(button, row) {
  const form = document.getElementById("toggle-form");
  const enabling = button.dataset.enabled === "1";
  form.action = button.dataset.url;
  document.getElementById("toggle-enabled").value = button.dataset.enabled;
  document.getElementById("toggle-submit").textContent = (enabling ? "Enable " : "Disable ") + row.dataset.rule;
  form.hidden = false;
  document.getElementById("toggle-note").focus();
}

body.addEventListener("click", (event) => {
  const button = event.target.closest("button");
  if (!button) return;
  const row = button.closest("tr");
  if (button.classList.contains("move-up") && row.previousElementSibling) {
    body.insertBefore(row, row.previousElementSibling);
  } else if (button.classList.contains("move-down") && row.nextElementSibling) {
    body.insertBefore(row.nextElementSibling, row);
  } else if (button.classList.contains("toggle-rule")) {
    showToggleForm(button, row);
    return;
  } else {
    return;
  }
  button.focus();
  orderInput.value = names().join(",");
  bar.hidden = orderInput.value === original;
});
