// Who else is looking at each request, as the reviewer socket relays it
// (`{"event": "presence", request_id, name, key, here}`; the server relays only
// requests this reviewer may see). Kept in memory only: it starts empty on every
// (re)connect and the other pages say again what they look at.
//
// Each page repeats its look every ~20 s (queue.js's HEARTBEAT_MS); a look not heard
// of for EXPIRE_MS is forgotten, so a "gone" lost on the way (a dropped socket, a
// laptop closed mid-look) does not leave "also looking" on a card for good.

export const EXPIRE_MS = 45000;
const SWEEP_MS = 5000;

// request id -> Map(socket key -> {name, at}): one person may look from several tabs.
const lookers = new Map();

/** Show on the request's card and row who else is looking at it. */
export function showPresence(id) {
  const names = Array.from(new Set(Array.from((lookers.get(id) || new Map()).values(), (look) => look.name))).sort();
  const text = names.length ? names.join(", ") + (names.length === 1 ? " is" : " are") + " looking at this" : "";
  const card = document.getElementById("card-" + id);
  const line = card ? card.querySelector(".presence") : null;
  if (line) { line.textContent = text; line.hidden = !text; }
  const row = document.getElementById("row-" + id);
  const badge = row ? row.querySelector(".row-presence") : null;
  if (badge) {
    badge.textContent = names.join(", ");
    badge.hidden = !names.length;
    badge.title = text;
  }
}

/** Apply one presence message. */
export function onPresence(message) {
  const id = message.request_id;
  // One socket looks at one request at a time: a new look ends its old one.
  lookers.forEach((keys, other) => { if (other !== id && keys.delete(message.key)) showPresence(other); });
  if (message.here) {
    if (!lookers.has(id)) lookers.set(id, new Map());
    lookers.get(id).set(message.key, { name: message.name, at: Date.now() });
  } else if (lookers.has(id)) {
    lookers.get(id).delete(message.key);
  }
  showPresence(id);
}

/** Forget everyone (the socket closed: what we knew may be stale). */
export function forgetPresence() {
  const shown = Array.from(lookers.keys());
  lookers.clear();
  shown.forEach(showPresence);
}

// Looks whose heartbeat stopped.
setInterval(() => {
  const now = Date.now();
  lookers.forEach((keys, id) => {
    let changed = false;
    keys.forEach((look, key) => { if (now - look.at > EXPIRE_MS) { keys.delete(key); changed = true; } });
    if (changed) showPresence(id);
  });
}, SWEEP_MS);
