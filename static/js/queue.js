// The reviewer queue: a triage list beside the selected request's card, live over
// ws/reviewer/, decisions without a reload, safe keyboard shortcuts and presence.
//
// Socket messages are hints (at-most-once): every one triggers a resync against
// queue/sync.json, which lists the cards that should be shown, in the page's order,
// with a version each, and the counts for the page's filters. Cards that are missing
// or out of date are fetched as server-rendered fragments (the card and its row).
// Counts are only ever shown as the server computed them.

import { CODES } from "./codes.js";
import { updateEmergency } from "./emergency.js";
import { getHTML, getJSON, postForm } from "./http.js";
import { signDecision } from "./passkey.js";
import { forgetPresence, onPresence, showPresence } from "./presence.js";
import { offerUndo, say, withdrawUndo } from "./toast.js";
import "./schema_form.js";

// The refusals this page acts on, read from the server's table once, at load: a code
// the server does not register stops the script here, not silently at decision time.
const {
  SESSION_ENDED, STEP_UP_REQUIRED, STEP_UP_FAILED, REVISION_CHANGED, REVISION_REQUIRED,
  ALREADY_DECIDED, ILLEGAL_TRANSITION, DECISION_DEADLINE_PASSED,
} = CODES;

const cardsEl = document.getElementById("cards");
const listEl = document.getElementById("queue-list");
if (!cardsEl || !listEl) throw new Error("queue.js runs on the queue page only: it has no #cards / #queue-list");

// The page's filters and window (?shown=): "Show 25 more" and j past the last row grow it.
let query = cardsEl.dataset.query || "";
const qsOf = () => (query ? "?" + query : "");
const cardUrl = (id) => cardsEl.dataset.cardUrl.replace("__id__", id) + qsOf();
const countEl = document.getElementById("queue-count");
const expiringEl = document.getElementById("expiring-count");
const shownNoteEl = document.getElementById("shown-note");
const emptyEl = document.getElementById("empty-state");
const hintEl = document.getElementById("pane-hint");
const statusEl = document.getElementById("live-status");
const confirmDialog = document.getElementById("confirm-decision");
const baseTitle = document.title.replace(/^\(\d+\)\s*/, "");
// The held-back approval's window: long enough to notice a wrong key, short enough not to matter.
const UNDO_MS = 5000;
const HEARTBEAT_MS = 20000;

document.body.classList.add("js-triage");  // without this script every card shows, one after the other

let selectedId = null;

// --- Rows and cards -------------------------------------------------------------
const rowOf = (id) => document.getElementById("row-" + id);
const cardOf = (id) => document.getElementById("card-" + id);
function rows() { return Array.from(listEl.querySelectorAll(".queue-row:not(.is-leaving)")); }
function titleOf(id) {
  const card = cardOf(id);
  return card ? card.querySelector(".card-title").textContent.trim().replace(/\s+/g, " ") : "The request";
}

function renderCount(total) {
  if (total !== undefined && countEl) countEl.textContent = String(total);
  const shown = countEl ? countEl.textContent : "";
  document.title = (/^\d+$/.test(shown) && shown !== "0" ? "(" + shown + ") " : "") + baseTitle;
  const any = rows().length > 0;
  emptyEl.hidden = any;
  if (hintEl) hintEl.hidden = !any || selectedId !== null;
}

function renderCounts(state) {
  renderCount(state.count);
  Object.entries(state.by_risk || {}).forEach(([level, n]) => {
    const el = listEl.ownerDocument.querySelector('[data-risk-count="' + level + '"]');
    if (el) el.textContent = String(n);
  });
  if (expiringEl && state.expiring !== undefined) expiringEl.textContent = String(state.expiring);
  if (shownNoteEl && state.more !== undefined) shownNoteEl.hidden = !state.more;
}

// A batch's members follow its header row, indented; the sync says which group each is in.
function markGroups(entries) {
  entries.forEach((c) => {
    const row = rowOf(c.id);
    if (!row || row.classList.contains("group-row")) return;
    if (c.group) row.dataset.group = c.group; else delete row.dataset.group;
  });
  const heads = new Set(rows().filter((row) => row.classList.contains("group-row")).map((row) => row.dataset.id));
  rows().forEach((row) => row.classList.toggle("in-group", Boolean(row.dataset.group) && heads.has(row.dataset.group)));
}

function fragmentParts(html) {
  const template = document.createElement("template");
  template.innerHTML = html.trim();
  return { card: template.content.querySelector(".card"), row: template.content.querySelector(".queue-row") };
}

function fieldKey(field) {
  const form = field.closest("form");
  return (form ? form.className : "") + "|" + field.name;
}

function typedText(card) {
  const typed = new Map();
  card.querySelectorAll("textarea, input[type=text]").forEach((field) => {
    if (field.value !== field.defaultValue) typed.set(fieldKey(field), field.value);
  });
  return typed;
}

function isKept(id) {
  const card = cardOf(id);
  return Boolean(card && card.classList.contains("is-decided"));
}

function placeCard(card, row) {
  const id = card.dataset.id;
  if (isKept(id)) return;  // a decided card kept for its draft is not replaced
  const existing = cardOf(id);
  if (existing) {
    const open = Array.from(existing.querySelectorAll("details[open]")).map((d) => d.className.split(" ")[0]);
    const drafts = typedText(existing);
    const focused = existing.contains(document.activeElement) ? fieldKey(document.activeElement) : null;
    existing.replaceWith(card);
    open.forEach((cls) => { const d = card.querySelector("details." + cls); if (d) d.open = true; });
    // Another reviewer's vote re-renders the card: what this reviewer typed stays.
    card.querySelectorAll("textarea, input[type=text]").forEach((field) => {
      const key = fieldKey(field);
      if (drafts.has(key)) field.value = drafts.get(key);
      if (key === focused) field.focus();
    });
  } else {
    cardsEl.insertBefore(card, hintEl);
  }
  const oldRow = rowOf(id);
  if (oldRow) {
    oldRow.replaceWith(row);
  } else {
    const after = rows().find((other) => other.dataset.sort > row.dataset.sort);
    row.classList.add("is-new");
    listEl.insertBefore(row, after || null);
  }
  if (id === selectedId) markSelected(id);
  showPresence(id);
  tick();
}

function removeCard(id) {
  if (isKept(id)) return;
  const row = rowOf(id);
  const card = cardOf(id);
  if (id === selectedId) {
    const list = rows();
    const i = list.indexOf(row);
    const next = list[i + 1] || list[i - 1];
    select(next && next !== row ? next.dataset.id : null, { scroll: false });
  }
  if (row) { row.classList.add("is-leaving"); setTimeout(() => { row.remove(); renderCount(); }, 320); }
  if (card) card.remove();
  renderCount();
}

// A batch group's fragment has its own URL (the sync gives it); a request's is cardUrl.
async function fetchCard(id, url) {
  const answer = await getHTML(url ? url + qsOf() : cardUrl(id));
  if (answer.status === 204) { removeCard(id); return; }
  if (!answer.ok) return;
  const { card, row } = fragmentParts(answer.body);
  if (card && row) placeCard(card, row);
}

let syncing = null;
let syncAgain = false;
async function resync() {
  if (syncing) { syncAgain = true; return syncing; }
  syncing = (async () => {
    try {
      const answer = await getJSON(cardsEl.dataset.syncUrl + qsOf());
      if (answer.status === 401 || answer.status === 403 || answer.redirected) { window.location.reload(); return; }
      if (!answer.ok) return;
      const state = answer.body;
      const wanted = new Map(state.cards.map((c) => [c.id, c]));
      rows().forEach((row) => { if (!wanted.has(row.dataset.id)) removeCard(row.dataset.id); });
      const stale = state.cards.filter((c) => {
        const el = cardOf(c.id);
        return !el || el.dataset.version !== c.version;
      });
      await Promise.all(stale.map((c) => fetchCard(c.id, c.url)));
      // The server's order is the order: rows move to match it (kept, decided ones stay on top).
      state.cards.forEach((c) => { const row = rowOf(c.id); if (row && !isKept(c.id)) listEl.appendChild(row); });
      markGroups(state.cards);
      renderCounts(state);
    } catch (error) {
      // Offline for a moment: the next socket event or reconnect resyncs again.
    }
  })();
  await syncing;
  syncing = null;
  if (syncAgain) { syncAgain = false; return resync(); }
}

let syncTimer = null;
function scheduleResync(delay) {
  clearTimeout(syncTimer);
  syncTimer = setTimeout(resync, delay === undefined ? 60 : delay);
}

// --- Selection ------------------------------------------------------------------------
function markSelected(id) {
  rows().forEach((row) => row.setAttribute("aria-selected", String(row.dataset.id === id)));
  cardsEl.querySelectorAll(".card").forEach((card) => card.classList.toggle("is-selected", card.dataset.id === id));
  if (id) listEl.setAttribute("aria-activedescendant", "row-" + id);
  else listEl.removeAttribute("aria-activedescendant");
}

function select(id, { scroll = true } = {}) {
  if (id === selectedId) return;
  if (held && held.id !== id) sendHeld();  // moving on is the reviewer's "yes, send it"
  selectedId = id;
  markSelected(id);
  announcePresence();
  renderCount();
  keepInUrl(id);
  if (!id) return;
  const row = rowOf(id);
  if (row && scroll) row.scrollIntoView({ block: "nearest" });
  // Phones stack the pane under the list: bring the card into view there.
  if (scroll && window.matchMedia("(max-width: 900px)").matches) {
    const card = cardOf(id);
    if (card) card.scrollIntoView({ block: "start" });
  }
}

// The selection lives in the URL's fragment (#selected=<id>): a reload, a shared link or
// Back opens the same request. replaceState, not pushState: j/k do not fill the history.
const SELECTED = /^#selected=([\w:.-]+)$/;
function keepInUrl(id) {
  const url = window.location.pathname + window.location.search + (id ? "#selected=" + id : "");
  if (url !== window.location.pathname + window.location.search + window.location.hash) history.replaceState(history.state, "", url);
}

// When the queue opens: the request the URL names if it is still here, else the first row.
function selectOnOpen() {
  const named = (window.location.hash.match(SELECTED) || [])[1];
  if (named && rowOf(named)) { select(named); return; }
  const first = rows()[0];
  if (first) select(first.dataset.id, { scroll: false });
  else keepInUrl(null);
}

// --- The window: more rows in place, the same live sync ------------------------------------
const showMoreEl = document.getElementById("show-more");
const shownLimitEl = document.getElementById("shown-limit");

function moreToShow() {
  return Boolean(showMoreEl && shownNoteEl && !shownNoteEl.hidden && !showMoreEl.hidden);
}

async function showMore() {
  const params = new URLSearchParams(query);
  const size = Number(showMoreEl.dataset.pageSize);
  const shown = Math.min(Number(params.get("shown") || size) + size, Number(showMoreEl.dataset.windowMax));
  params.set("shown", String(shown));
  query = params.toString();
  showMoreEl.href = "?" + query;
  history.replaceState(history.state, "", window.location.pathname + "?" + query + window.location.hash);
  if (shownLimitEl) shownLimitEl.textContent = String(shown);
  if (shown >= Number(showMoreEl.dataset.windowMax)) showMoreEl.hidden = true;
  await resync();
}

if (showMoreEl) {
  showMoreEl.addEventListener("click", (event) => { event.preventDefault(); showMore(); });
}

async function move(step) {
  const list = rows();
  if (!list.length) return;
  const i = selectedId ? list.indexOf(rowOf(selectedId)) : -1;
  if (step > 0 && i === list.length - 1 && moreToShow()) {
    await showMore();  // j past the last row: the next page joins the list, and j goes on into it
    const longer = rows();
    if (longer.length > list.length) { select(longer[i + 1].dataset.id); return; }
  }
  const next = list[Math.max(0, Math.min(list.length - 1, i + step))] || list[0];
  select(next.dataset.id);
  // The listbox holds the focus, so assistive technology reads the active row.
  if (!listEl.contains(document.activeElement)) listEl.focus({ preventScroll: true });
}

listEl.addEventListener("click", (event) => {
  const row = event.target.closest(".queue-row");
  if (!row) return;
  event.preventDefault();  // the row's link is the no-script way to the card
  select(row.dataset.id);
  listEl.focus({ preventScroll: true });
});

listEl.addEventListener("keydown", (event) => {
  if (event.key === "ArrowDown") { event.preventDefault(); move(1); }
  else if (event.key === "ArrowUp") { event.preventDefault(); move(-1); }
  else if (event.key === "Enter" && selectedId) {
    event.preventDefault();
    const card = cardOf(selectedId);
    if (card) card.focus();
  }
});

// --- Presence: who else is looking (presence.js keeps who; this page says what it looks at) ---
function announcePresence() {
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ type: "presence", request_id: selectedId }));
  }
}
// Said again every HEARTBEAT_MS: the other pages forget a look not heard of for
// presence.js's EXPIRE_MS, so a lost "gone" (a dropped socket, a sleeping laptop)
// does not leave a name on a card for good. Batch panes are not requests: nothing to say.
setInterval(() => { if (selectedId && !selectedId.startsWith("batch-")) announcePresence(); }, HEARTBEAT_MS);

// --- The socket ------------------------------------------------------------------------
let socket = null;
let backoff = 500;
function setStatus(live) {
  if (!statusEl) return;
  statusEl.hidden = false;
  statusEl.classList.toggle("is-live", live);
  statusEl.classList.toggle("is-down", !live);
  statusEl.querySelector(".label").textContent = live ? "Live" : "Reconnecting…";
}

function connect() {
  const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
  socket = new WebSocket(scheme + window.location.host + cardsEl.dataset.socketPath);
  socket.addEventListener("open", () => {
    backoff = 500;
    setStatus(true);
    forgetPresence();
    socket.send(JSON.stringify({ type: "presence.sync" }));
    announcePresence();
    resync();
  });
  socket.addEventListener("message", (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch (error) { return; }
    handle(message);
  });
  socket.addEventListener("close", () => {
    setStatus(false);
    forgetPresence();
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 15000);
  });
}

const mine = new Set();  // ids this page decided: their pushes need no second toast

function stateWords(state) { return String(state || "").replace(/_/g, " "); }

function handle(message) {
  switch (message.event) {
    case "card.removed": {
      const id = message.request_id;
      const data = message.data || {};
      if (mine.has(id)) { mine.delete(id); removeCard(id); scheduleResync(); break; }
      if (held && held.id === id) cancelHeld();  // someone else was faster: nothing to send
      if (cardOf(id)) {
        const title = titleOf(id);
        if (data.verb === "access.revoked") {
          say(title + " is no longer yours to decide.", "info");
          removeCard(id);
        } else {
          const who = data.decided_by_name || data.decided_by;  // the full name, else the username
          const by = who ? " by " + who : "";
          say(title + " was " + stateWords(message.state) + by + ".", "info");
          if (hasDraft(id)) keepDecided(id, message.state, who);
          else removeCard(id);
        }
      }
      scheduleResync();
      break;
    }
    case "card.created":
    case "card.updated":
      scheduleResync(0);
      break;
    case "presence":
      onPresence(message);
      break;
    case "emergency.changed":
      updateEmergency(message);
      break;
    default:
      break;
  }
}

// --- A draft survives another reviewer's decision ---------------------------------------
function hasDraft(id) {
  const card = cardOf(id);
  return Boolean(card && Array.from(typedText(card).values()).some((text) => text.trim() !== ""));
}

function keepDecided(id, state, by) {
  const card = cardOf(id);
  card.classList.add("is-decided");
  card.querySelectorAll("textarea, input").forEach((field) => { field.readOnly = true; });
  card.querySelectorAll("button, select").forEach((control) => { control.disabled = true; });
  card.querySelectorAll("details.reject-details, details.edit-details").forEach((d) => {
    if (Array.from(d.querySelectorAll("textarea")).some((t) => t.value.trim())) d.open = true;
  });
  const note = document.createElement("div");
  note.className = "decided-note";
  note.setAttribute("role", "status");
  const text = document.createElement("p");
  text.textContent = "Decided by " + (by || "someone else") + " (" + stateWords(state) + "). Your draft is kept below to copy.";
  const dismiss = document.createElement("button");
  dismiss.type = "button";
  dismiss.className = "btn btn-secondary btn-small dismiss-decided";
  dismiss.textContent = "Dismiss";
  dismiss.addEventListener("click", () => { card.classList.remove("is-decided"); removeCard(id); scheduleResync(); });
  note.append(text, dismiss);
  card.querySelector(".card-head").after(note);
  const row = rowOf(id);
  if (row) row.classList.add("is-decided");
}

// --- Countdowns -------------------------------------------------------------------------
function formatLeft(ms, short) {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  const tail = short ? "" : " left";
  if (d > 0) return d + "d " + h + "h" + tail;
  if (h > 0) return h + "h " + String(m).padStart(2, "0") + "m" + tail;
  return m + "m " + String(sec).padStart(2, "0") + "s" + tail;
}
function tick() {
  const now = Date.now();
  document.querySelectorAll(".queue .countdown[data-deadline]").forEach((el) => {
    const left = Date.parse(el.dataset.deadline) - now;
    const card = el.closest(".card");
    if (Number.isNaN(left)) return;
    if (left <= 0) {
      el.textContent = "expired";
      el.className = "countdown is-over";
      if (card && !card.classList.contains("is-expired")) { card.classList.add("is-expired"); scheduleResync(1500); }
      return;
    }
    el.textContent = formatLeft(left, !card);
    el.classList.toggle("is-urgent", left < 2 * 60 * 1000);
    el.classList.toggle("is-soon", left >= 2 * 60 * 1000 && left < 15 * 60 * 1000);
  });
}
setInterval(tick, 1000);

// --- Decisions ----------------------------------------------------------------------------
// Refusals that mean the card is no longer the reviewer's to decide.
const GONE = [ALREADY_DECIDED, ILLEGAL_TRANSITION, DECISION_DEADLINE_PASSED];
const ASK_FIRST = new Set(["critical", "high"]);

// An approval held back for UNDO_MS: {id, form, timer}. Undo drops it; nothing was sent.
let held = null;

function confirmed(card, what) {
  if (!ASK_FIRST.has(card.dataset.risk) || !confirmDialog) return Promise.resolve(true);
  confirmDialog.querySelector(".confirm-level").textContent = card.dataset.risk;
  confirmDialog.querySelector(".confirm-what").textContent = what;
  confirmDialog.returnValue = "";
  return new Promise((done) => {
    confirmDialog.addEventListener("close", () => done(confirmDialog.returnValue === "confirm"), { once: true });
    confirmDialog.showModal();
    confirmDialog.querySelector("button[value=cancel]").focus();  // the safe choice has the focus
  });
}

// What the confirm names: the request, who asks and for whom, and its summary line;
// not the card's links ("Request page") or its timestamps.
function confirmText(card) {
  const words = (selector) => {
    const el = card.querySelector(selector);
    return el ? el.textContent.trim().replace(/\s+/g, " ") : "";
  };
  const agent = words(".card-sub .agent");
  const person = words(".card-sub .person");
  const who = agent + (person ? " on behalf of " + person : "");
  const summary = words(".card-summary");
  return titleOf(card.dataset.id) + (who ? " from " + who : "") + (summary ? ": " + summary : "") + ".";
}

function hold(form) {
  const id = form.closest(".card").dataset.id;
  if (held) sendHeld();
  const seconds = Math.round(UNDO_MS / 1000);
  held = { id, form, timer: setTimeout(sendHeld, UNDO_MS) };
  form.closest(".card").classList.add("is-held");
  offerUndo("Approving " + titleOf(id) + " in " + seconds + " seconds.", cancelHeld);
}

function cancelHeld() {
  if (!held) return;
  clearTimeout(held.timer);
  const card = cardOf(held.id);
  if (card) card.classList.remove("is-held");
  held = null;
  withdrawUndo();
}

function sendHeld({ leaving = false } = {}) {
  if (!held) return;
  const { form } = held;
  clearTimeout(held.timer);
  held = null;
  withdrawUndo();
  send(form, { leaving });
}

// The reviewer leaves: the held approval goes now (keepalive outlives the page).
window.addEventListener("pagehide", () => sendHeld({ leaving: true }));

async function send(form, { leaving = false } = {}) {
  if (form.dataset.batch) { await sendBatch(form, { leaving }); return; }
  const card = form.closest(".card");
  const id = card.dataset.id;
  card.classList.remove("is-held");
  card.classList.add("is-busy");
  mine.add(id);
  try {
    const { ok, status, body } = await postForm(form, { keepalive: leaving });
    if (ok) {
      say(body.message, "success");
      if (body.state && body.state !== "pending_approval") removeCard(id);
      else { mine.delete(id); fetchCard(id); }
      scheduleResync(200);
      return;
    }
    mine.delete(id);
    say(body.message, "warning");
    if (body.code === SESSION_ENDED) {
      window.location.reload();
    } else if (body.code === STEP_UP_REQUIRED || body.code === STEP_UP_FAILED) {
      const secret = form.querySelector("input[type=password]");
      if (secret) {
        secret.closest("label").hidden = false;
        secret.required = true;
        secret.value = "";
        select(id);
        secret.focus();
      }
    } else if (body.code === REVISION_CHANGED || body.code === REVISION_REQUIRED) {
      fetchCard(id); // the card as it is now, with the revision its forms name
    } else if (GONE.includes(body.code) || status === 404) {
      removeCard(id);
      scheduleResync(200);
    }
  } catch (error) {
    mine.delete(id);
    say("Network problem: the decision may not have been recorded. Resyncing…", "warning");
    scheduleResync(500);
  } finally {
    card.classList.remove("is-busy");
  }
}

// "Approve all" / "Reject all" on a batch: the server decides each member on its own
// (every guard of a single decision) and answers per request; refusals stay on show.
async function sendBatch(form, { leaving = false } = {}) {
  const card = form.closest(".card");
  const members = Array.from(form.querySelectorAll("input[name=request]")).map((field) => field.value.split(":")[0]);
  card.classList.remove("is-held");
  card.classList.add("is-busy");
  members.forEach((id) => mine.add(id));
  try {
    const { ok, body } = await postForm(form, { keepalive: leaving });
    if (!ok) {
      members.forEach((id) => mine.delete(id));
      say(body.message, "warning");
      if (body.code === SESSION_ENDED) window.location.reload();
      return;
    }
    const results = body.results || [];
    results.forEach((result) => {
      const cell = card.querySelector('tr[data-member="' + result.id + '"] .member-result');
      if (cell) {
        cell.textContent = result.ok ? result.message : "Refused: " + result.message;
        cell.className = "member-result " + (result.ok ? "is-done" : "is-refused");
        cell.dataset.code = result.code || "";
      }
      if (!result.ok || result.state === "pending_approval") mine.delete(result.id);
      if (result.ok && result.state !== "pending_approval") removeCard(result.id);
    });
    const refused = results.filter((result) => !result.ok);
    say(body.message, refused.length ? "warning" : "success");
    if (refused.length) keepReport(card, body.message);
    else removeCard(card.dataset.id);
    scheduleResync(200);
    if (refused.some((result) => result.code === SESSION_ENDED)) window.location.reload();
  } catch (error) {
    members.forEach((id) => mine.delete(id));
    say("Network problem: the decisions may not have been recorded. Resyncing…", "warning");
    scheduleResync(500);
  } finally {
    card.classList.remove("is-busy");
  }
}

// A batch with refusals keeps its pane (the per-request results) until dismissed;
// the refused members stay in the queue as their own rows.
function keepReport(card, message) {
  card.classList.add("is-decided");
  card.querySelectorAll("button, textarea, input").forEach((control) => { control.disabled = true; });
  const note = document.createElement("div");
  note.className = "decided-note";
  note.setAttribute("role", "status");
  const text = document.createElement("p");
  text.textContent = message;
  const dismiss = document.createElement("button");
  dismiss.type = "button";
  dismiss.className = "btn btn-secondary btn-small dismiss-decided";
  dismiss.textContent = "Dismiss";
  dismiss.addEventListener("click", () => { card.classList.remove("is-decided"); removeCard(card.dataset.id); scheduleResync(0); });
  note.append(text, dismiss);
  card.querySelector(".card-head").after(note);
  const row = rowOf(card.dataset.id);
  if (row) row.classList.add("is-decided");
}

cardsEl.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.decide");
  if (!form) return;
  event.preventDefault();
  const card = form.closest(".card");
  if (card.classList.contains("is-decided") || card.classList.contains("is-busy")) return;
  const approving = form.dataset.action === "approve" || form.dataset.action === "edit";
  if (approving && !(await confirmed(card, confirmText(card)))) {
    say("Not approved.", "info");
    return;
  }
  const unsigned = await signDecision(form);
  if (unsigned) { say(unsigned.message, "warning"); return; }
  if (form.dataset.action === "approve") hold(form);
  else send(form);
});

cardsEl.addEventListener("click", (event) => {
  // A batch pane's member opens that member's own card (to decide it alone).
  const member = event.target.closest(".member-link");
  if (member) {
    event.preventDefault();
    select(member.closest("tr").dataset.member);
    return;
  }
  const card = event.target.closest(".card");
  if (card && card.dataset.id !== selectedId) select(card.dataset.id, { scroll: false });
});

cardsEl.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.tagName === "TEXTAREA") {
    event.preventDefault();
    event.target.form.requestSubmit();
  }
});

// --- Keyboard shortcuts ---------------------------------------------------------------
const dialog = document.getElementById("shortcuts");
function openDetails(card, cls, focusSelector) {
  const details = card.querySelector("details." + cls);
  if (!details) return false;
  details.open = true;
  const field = details.querySelector(focusSelector);
  if (field) field.focus();
  return true;
}

document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName) || event.target.isContentEditable;
  if (event.key === "Escape" && typing) { event.target.blur(); return; }
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  if (document.querySelector("dialog[open]")) return;  // the open dialog has the keys
  switch (event.key) {
    case "j": move(1); break;
    case "k": move(-1); break;
    case "?": if (dialog) dialog.showModal(); break;
    case "a":
    case "r":
    case "e":
    case "o": {
      // Only ever the selected card: with nothing selected a key does nothing.
      const card = selectedId ? cardOf(selectedId) : null;
      if (!card || card.classList.contains("is-decided")) return;
      event.preventDefault();
      if (event.key === "a" && card.classList.contains("group-card")) {
        say("Shift+A approves every call of this batch; select a call to approve it alone.", "info");
      } else if (event.key === "a" && !card.querySelector(".approve-form") && card.querySelector(".respond-form")) {
        // A suspension is answered, not approved: the key takes the reviewer to its form.
        const field = card.querySelector(".respond-form .sf-field input, .respond-form .sf-field select, .respond-form textarea:not([hidden])");
        if (field) field.focus();
        say("Answer the step's form, then Send answer (or reject it).", "info");
      } else if (event.key === "a") {
        const secret = card.querySelector(".approve-form input[type=password]");
        if (secret && !secret.value) { secret.focus(); break; }
        const button = card.querySelector(".approve-form button[type=submit]:not([disabled])");
        if (button) button.form.requestSubmit(button);
      } else if (event.key === "r") {
        openDetails(card, "reject-details", "textarea");
      } else if (event.key === "e") {
        openDetails(card, "edit-details", "textarea");
      } else {
        const more = card.querySelector("details.card-more");
        if (more) more.open = !more.open;
      }
      break;
    }
    case "A": {
      // Approve all, on a batch's header only, with the single approval's confirm and undo.
      const card = selectedId ? cardOf(selectedId) : null;
      if (!card || !card.classList.contains("group-card") || card.classList.contains("is-decided")) return;
      event.preventDefault();
      const secret = card.querySelector(".approve-all-form input[type=password]");
      if (secret && !secret.value) { secret.focus(); break; }
      const button = card.querySelector(".approve-all-form button[type=submit]:not([disabled])");
      if (button) button.form.requestSubmit(button);
      break;
    }
    default: return;
  }
});

renderCount();
selectOnOpen();
tick();
connect();
