// Revealing a masked param on a card: the reviewer asks, the server checks that they
// may decide the request, records the reveal in the audit chain and answers the value.
// The value is shown as text (never HTML) and pre-fills the card's edit box, whose
// "leave empty to keep" would otherwise start blank.
//
// Delegated from the document, so cards the queue re-renders on a push keep working.

import { postJSON } from "./http.js";

function editBox(cardId, field) {
  return document.getElementById("edit-" + cardId + "-" + field);
}

async function reveal(button) {
  const { revealUrl, field, card } = button.dataset;
  const shown = button.parentElement.querySelector('[data-revealed-for="' + CSS.escape(field) + '"]');
  button.disabled = true;
  let answer;
  try {
    answer = await postJSON(revealUrl, { field });
  } catch (error) {
    answer = { ok: false, body: { message: "Could not reach the server." } };
  }
  if (!answer.ok) {
    button.disabled = false;
    if (shown) {
      shown.textContent = answer.body.message;
      shown.classList.add("reveal-error");
      shown.hidden = false;
    }
    return;
  }
  const text = typeof answer.body.value === "string" ? answer.body.value : JSON.stringify(answer.body.value, null, 2);
  if (shown) {
    shown.textContent = text;
    shown.classList.remove("reveal-error");
    shown.hidden = false;
  }
  const mask = button.parentElement.querySelector(".masked");
  if (mask) mask.hidden = true;
  button.hidden = true;
  const box = editBox(card, field);
  if (box && box.value === "") {
    box.value = answer.body.edit_value ?? text;
    const hint = document.querySelector('label[for="' + box.id + '"] .muted');
    if (hint) hint.textContent = "(revealed: edit it, or leave it as it is to keep)";
  }
}

document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest(".reveal-btn") : null;
  if (button) {
    event.preventDefault();
    reveal(button);
  }
});
