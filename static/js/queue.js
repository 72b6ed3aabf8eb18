// The reviewer queue: live cards over ws/reviewer/, resync on (re)connect,
// decisions without a reload, countdowns and keyboard shortcuts.
//
// Socket messages are hints (at-most-once): every one triggers a resync against
// queue/sync.json, which lists the cards that should be shown with a version each;
// cards that are missing or out of date are fetched as server-rendered fragments.

import { CODES } from "./codes.js";
import { updateEmergency } from "./emergency.js";
import { getHTML, getJSON, postForm } from "./http.js";
import { signDecision } from "./passkey.js";
import "./schema_form.js";

// The refusals this page acts on, read from the server's table once, at load: a code
// the server does not register stops the script here, not silently at decision time.
const {
  SESSION_ENDED, STEP_UP_REQUIRED, STEP_UP_FAILED, REVISION_CHANGED,
  ALREADY_DECIDED, ILLEGAL_TRANSITION, DECISION_DEADLINE_PASSED,
} = CODES;

const cardsEl = document.getElementById("cards");
if (!cardsEl) throw new Error("queue.js runs on the queue page only: it has no #cards");

const query = cardsEl.dataset.query || "";
const qs = query ? "?" + query : "";
const syncUrl = cardsEl.dataset.syncUrl + qs;
const cardUrl = (id) => cardsEl.dataset.cardUrl.replace("__id__", id) + qs;
const countEl = document.getElementById("queue-count");
const emptyEl = document.getElementById("empty-state");
const statusEl = document.getElementById("live-status");
const flashStack = document.getElementById("flash-stack");
const baseTitle = document.title.replace(/^\(\d+\)\s*/, "");

let total = Number(countEl ? countEl.textContent : 0) || 0;
let selected = null;

// --- Flash messages ---------------------------------------------------------
function flash(message, kind) {
  const el = document.createElement("div");
  el.className = "flash flash-" + (kind || "info");
  el.setAttribute("role", "status");
  el.textContent = message;
  flashStack.appendChild(el);
  setTimeout(() => { el.classList.add("is-leaving"); setTimeout(() => el.remove(), 450); }, 6000);
}
flashStack.querySelectorAll(".flash").forEach((el) => {
  setTimeout(() => { el.classList.add("is-leaving"); setTimeout(() => el.remove(), 450); }, 6000);
});

// --- Count and title ---------------------------------------------------------
function cards() { return Array.from(cardsEl.querySelectorAll(".card:not(.is-leaving)")); }
function renderCount() {
  if (countEl) countEl.textContent = String(total);
  document.title = (total > 0 ? "(" + total + ") " : "") + baseTitle;
  emptyEl.hidden = cards().length > 0;
}

// --- Cards in and out -----------------------------------------------------------
function fragmentToCard(html) {
  const template = document.createElement("template");
  template.innerHTML = html.trim();
  return template.content.firstElementChild;
}

function placeCard(card) {
  const existing = document.getElementById(card.id);
  if (existing) {
    const wasSelected = existing === selected;
    const openDetails = Array.from(existing.querySelectorAll("details[open]")).map((d) => d.className);
    existing.replaceWith(card);
    openDetails.forEach((cls) => { const d = card.querySelector("details." + cls.split(" ")[0]); if (d) d.open = true; });
    if (wasSelected) select(card, false);
  } else {
    const after = cards().find((other) => other.dataset.sort > card.dataset.sort);
    card.classList.add("is-new");
    cardsEl.insertBefore(card, after || null);
  }
  tick();
}

function removeCard(id, note) {
  const card = document.getElementById("card-" + id);
  if (!card || card.classList.contains("is-leaving")) return;
  if (card === selected) {
    const list = cards();
    const i = list.indexOf(card);
    selected = null;
    const next = list[i + 1] || list[i - 1];
    if (next && next !== card) select(next, false);
  }
  card.classList.add("is-leaving");
  setTimeout(() => { card.remove(); renderCount(); }, 320);
  if (note) flash(note, "info");
  renderCount();
}

async function fetchCard(id) {
  const answer = await getHTML(cardUrl(id));
  if (answer.status === 204) { removeCard(id); return; }
  if (!answer.ok) return;
  const card = fragmentToCard(answer.body);
  if (card) placeCard(card);
}

let syncing = null;
let syncAgain = false;
async function resync() {
  if (syncing) { syncAgain = true; return syncing; }
  syncing = (async () => {
    try {
      const answer = await getJSON(syncUrl);
      if (answer.status === 401 || answer.status === 403 || answer.redirected) { window.location.reload(); return; }
      if (!answer.ok) return;
      const state = answer.body;
      const wanted = new Map(state.cards.map((c) => [c.id, c]));
      cards().forEach((card) => { if (!wanted.has(card.dataset.id)) removeCard(card.dataset.id); });
      const stale = state.cards.filter((c) => {
        const el = document.getElementById("card-" + c.id);
        return !el || el.dataset.version !== c.version;
      });
      await Promise.all(stale.map((c) => fetchCard(c.id)));
      total = state.count;
      renderCount();
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

// --- The socket --------------------------------------------------------------
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
  socket.addEventListener("open", () => { backoff = 500; setStatus(true); resync(); });
  socket.addEventListener("message", (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch (error) { return; }
    handle(message);
  });
  socket.addEventListener("close", () => {
    setStatus(false);
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 15000);
  });
}

function handle(message) {
  switch (message.event) {
    case "card.removed": {
      const card = document.getElementById("card-" + message.request_id);
      if (card) {
        const title = card.querySelector(".card-title").textContent.trim();
        const revoked = message.data && message.data.verb === "access.revoked";
        removeCard(message.request_id, revoked ? title + " is no longer yours to decide."
          : title + " is now " + String(message.state).replace(/_/g, " ") + ".");
      }
      scheduleResync();
      break;
    }
    case "card.created":
    case "card.updated":
      scheduleResync(0);
      break;
    case "emergency.changed":
      updateEmergency(message);
      break;
    default:
      break;
  }
}

// --- Countdowns ------------------------------------------------------------------
function formatLeft(ms) {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (d > 0) return d + "d " + h + "h left";
  if (h > 0) return h + "h " + String(m).padStart(2, "0") + "m left";
  return m + "m " + String(sec).padStart(2, "0") + "s left";
}
function tick() {
  const now = Date.now();
  cardsEl.querySelectorAll(".countdown[data-deadline]").forEach((el) => {
    const left = Date.parse(el.dataset.deadline) - now;
    const card = el.closest(".card");
    if (Number.isNaN(left)) return;
    if (left <= 0) {
      el.textContent = "expired";
      el.className = "countdown is-over";
      if (card && !card.classList.contains("is-expired")) { card.classList.add("is-expired"); scheduleResync(1500); }
      return;
    }
    el.textContent = formatLeft(left);
    el.classList.toggle("is-urgent", left < 2 * 60 * 1000);
    el.classList.toggle("is-soon", left >= 2 * 60 * 1000 && left < 15 * 60 * 1000);
  });
}
setInterval(tick, 1000);

// --- Decisions without a reload ------------------------------------------------------
// Refusals that mean the card is no longer the reviewer's to decide.
const GONE = [ALREADY_DECIDED, ILLEGAL_TRANSITION, DECISION_DEADLINE_PASSED];

cardsEl.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.decide");
  if (!form) return;
  event.preventDefault();
  const card = form.closest(".card");
  card.classList.add("is-busy");
  try {
    const unsigned = await signDecision(form);
    if (unsigned) {
      flash(unsigned.message, "warning");
      return;
    }
    const { ok, status, body } = await postForm(form);
    if (ok) {
      flash(body.message, "success");
      if (body.state && body.state !== "pending_approval") removeCard(card.dataset.id);
      else fetchCard(card.dataset.id);
      scheduleResync(200);
    } else {
      flash(body.message, "warning");
      if (body.code === SESSION_ENDED) {
        window.location.reload();
      } else if (body.code === STEP_UP_REQUIRED || body.code === STEP_UP_FAILED) {
        const password = form.querySelector("input[type=password]");
        if (password) {
          password.closest("label").hidden = false;
          password.required = true;
          password.value = "";
          password.focus();
        }
      } else if (body.code === REVISION_CHANGED) {
        fetchCard(card.dataset.id);
      } else if (GONE.includes(body.code) || status === 404) {
        removeCard(card.dataset.id);
        scheduleResync(200);
      }
    }
  } catch (error) {
    flash("Network problem: the decision may not have been recorded. Resyncing…", "warning");
    scheduleResync(500);
  } finally {
    card.classList.remove("is-busy");
  }
});

// --- Keyboard shortcuts -----------------------------------------------------------
const dialog = document.getElementById("shortcuts");
function select(card, scroll) {
  if (selected) selected.classList.remove("is-selected");
  selected = card;
  if (!card) return;
  card.classList.add("is-selected");
  card.focus({ preventScroll: true });
  if (scroll !== false) card.scrollIntoView({ block: "nearest", behavior: "smooth" });
}
function move(step) {
  const list = cards();
  if (!list.length) return;
  const i = selected ? list.indexOf(selected) : -1;
  select(list[Math.max(0, Math.min(list.length - 1, i + step))] || list[0]);
}
function openDetails(card, cls, focusSelector) {
  const details = card.querySelector("details." + cls);
  if (!details) return false;
  details.open = true;
  const field = details.querySelector(focusSelector);
  if (field) field.focus();
  return true;
}

cardsEl.addEventListener("click", (event) => {
  const card = event.target.closest(".card");
  if (card && card !== selected) select(card, false);
});

cardsEl.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.tagName === "TEXTAREA") {
    event.preventDefault();
    event.target.form.requestSubmit();
  }
});

document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName) || event.target.isContentEditable;
  if (event.key === "Escape" && typing) { event.target.blur(); return; }
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  switch (event.key) {
    case "j": move(1); break;
    case "k": move(-1); break;
    case "?": if (dialog && !dialog.open) dialog.showModal(); break;
    case "a":
    case "r":
    case "e":
    case "o": {
      if (!selected) { move(1); if (!selected) return; }
      event.preventDefault();
      if (event.key === "a") {
        const password = selected.querySelector(".approve-form input[type=password]");
        if (password && !password.value) { password.focus(); break; }
        const button = selected.querySelector(".approve-form button[type=submit]:not([disabled])");
        if (button) button.form.requestSubmit(button);
      } else if (event.key === "r") {
        openDetails(selected, "reject-details", "textarea");
      } else if (event.key === "e") {
        openDetails(selected, "edit-details", "textarea");
      } else {
        const more = selected.querySelector("details.card-more");
        if (more) more.open = !more.open;
      }
      break;
    }
    default: return;
  }
});

renderCount();
tick();
connect();
