// Who else is looking at each request, as the reviewer socket relays it
// (`{"event": "presence", request_id, name, key, here}`; the server relays only
// requests this reviewer may see). Kept in memory only: it starts empty on every
// (re)connect and the other pages say again what they look at.

// request id -> Map(socket key -> name): one person may look from several tabs.
const lookers = new Map();

/** Show on the request's card and row who else is looking at it. */
export function showPresence(id) {
  const names = Array.from(new Set((lookers.get(id) || new Map()).values())).sort();
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
  lookers.forEach((keys, other) => { if (keys.delete(message.key)) showPresence(other); });
  if (message.here) {
    if (!lookers.has(id)) lookers.set(id, new Map());
    lookers.get(id).set(message.key, message.name);
  }
  showPresence(id);
}

/** Forget everyone (the socket closed: what we knew may be stale). */
export function forgetPresence() {
  const shown = Array.from(lookers.keys());
  lookers.clear();
  shown.forEach(showPresence);
}
