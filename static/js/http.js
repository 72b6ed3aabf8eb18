// How the pages' scripts talk to the server: same-origin cookies, the CSRF token on
// every write, and answers read as `{ok, status, redirected, body}`.
//
// `ok` is true only for a 2xx answer in the format asked for (JSON, or HTML for
// `getHTML`). When `ok` is false, `body` is always the one error shape,
// `{code, message, details}`: `code` is a registered code (compare it with
// `CODES.*` from codes.js) or null when the answer carried none (a proxy's page,
// Django's HTML 404), `message` is for people, `details` is an object (maybe empty).
//
// A network failure rejects, as fetch does: the caller decides what to say.

/** The CSRF token: the form's own field when there is a form, else base.html's meta tag. */
function csrfToken(form) {
  const field = form ? form.querySelector("input[name=csrfmiddlewaretoken]") : null;
  if (field) return field.value;
  const meta = document.querySelector("meta[name=csrf-token]");
  if (meta && meta.content) return meta.content;
  throw new Error("http.js: no CSRF token on the page (base.html renders it for signed-in users)");
}

function errorShape(status, parsed) {
  const body = parsed && typeof parsed === "object" ? parsed : {};
  const details = body.details && typeof body.details === "object" ? { ...body.details } : {};
  return {
    code: typeof body.code === "string" ? body.code : null,
    message: typeof body.message === "string" && body.message ? body.message : "Unexpected response (" + status + ").",
    details,
  };
}

async function request(url, { method = "GET", accept = "application/json", json, form, extra, keepalive = false } = {}) {
  const headers = { Accept: accept };
  // keepalive: the request outlives the page (a decision sent as the reviewer leaves).
  const init = { method, credentials: "same-origin", headers, keepalive };
  if (method !== "GET" && method !== "HEAD") {
    headers["X-CSRFToken"] = csrfToken(form);
    if (json !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(json);
    } else if (form) {
      init.body = new FormData(form);
      for (const [name, value] of Object.entries(extra || {})) init.body.set(name, value);
    }
  }
  const response = await fetch(url, init);
  const answer = { ok: response.ok, status: response.status, redirected: response.redirected, body: null };
  const type = response.headers.get("Content-Type") || "";
  if (accept === "application/json") {
    let parsed = null;
    const isJSON = type.includes("json");
    if (isJSON) {
      try { parsed = await response.json(); } catch (error) { parsed = null; }
    }
    answer.ok = response.ok && (response.status === 204 || (isJSON && parsed !== null));
    answer.body = answer.ok ? (parsed || {}) : errorShape(response.status, parsed);
  } else {
    const text = await response.text();
    answer.ok = response.ok && (response.status === 204 || !type.includes("json"));
    answer.body = answer.ok ? text : errorShape(response.status, type.includes("json") ? safeParse(text) : null);
  }
  return answer;
}

function safeParse(text) {
  try { return JSON.parse(text); } catch (error) { return null; }
}

/** GET a JSON document. */
export function getJSON(url) {
  return request(url);
}

/** GET a server-rendered HTML fragment; `body` is its text ("" for a 204). */
export function getHTML(url) {
  return request(url, { accept: "text/html" });
}

/** POST `payload` as JSON, with the page's CSRF token. */
export function postJSON(url, payload) {
  return request(url, { method: "POST", json: payload });
}

/** POST a form's fields (as `multipart/form-data`) to its action, with its CSRF token;
 * `keepalive` lets it finish after the page is gone. */
export function postForm(form, { keepalive = false } = {}) {
  return request(form.action, { method: "POST", form, keepalive });
}

/** POST a form's fields, with `extra` fields set over them, to `url` (not the form's action). */
export function postFields(url, form, extra) {
  return request(url, { method: "POST", form, extra });
}
