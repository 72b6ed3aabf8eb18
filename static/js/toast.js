// What the queue tells the reviewer: one toast per outcome, replaced rather than
// stacked (a newer outcome, an error above all, makes the older one wrong or stale),
// and the undo toast of a decision that has not been sent yet.

const stack = document.getElementById("flash-stack");
const LIFETIME = 6000;
let current = null;
let timer = null;

function leave(el) {
  el.classList.add("is-leaving");
  setTimeout(() => el.remove(), 450);
}

/** Show `message` as the one toast, replacing whatever was shown (server messages too). */
export function say(message, kind) {
  clearTimeout(timer);
  stack.querySelectorAll(".flash").forEach((el) => el.remove());
  const el = document.createElement("div");
  el.className = "flash flash-" + (kind || "info");
  el.setAttribute("role", kind === "warning" ? "alert" : "status");
  el.textContent = message;
  stack.appendChild(el);
  current = el;
  timer = setTimeout(() => { if (current === el) { leave(el); current = null; } }, LIFETIME);
}

// Messages the server rendered into the page (a no-JavaScript decision's redirect) leave the same way.
stack.querySelectorAll(".flash").forEach((el) => setTimeout(() => leave(el), LIFETIME));

const undoEl = document.getElementById("undo-toast");
const undoText = undoEl ? undoEl.querySelector(".undo-text") : null;
const undoButton = document.getElementById("undo-button");
let onUndo = null;

/** Show the undo toast for a decision held back; `undo` runs if the reviewer clicks Undo. */
export function offerUndo(message, undo) {
  if (!undoEl) return;
  undoText.textContent = message;
  onUndo = undo;
  undoEl.hidden = false;
}

/** Hide the undo toast (the decision was sent or cancelled). */
export function withdrawUndo() {
  if (!undoEl) return;
  undoEl.hidden = true;
  onUndo = null;
}

if (undoButton) {
  undoButton.addEventListener("click", () => {
    const undo = onUndo;
    withdrawUndo();
    if (undo) undo();
  });
}
