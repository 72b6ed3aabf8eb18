// Step-up by passkey for a card's decision: fetch a challenge made for exactly this
// (request, revision, verdict), have the browser sign it with the reviewer's passkey
// (user verification required), and put the assertion in the form's hidden fields.
// The server checks it once, for this decision only (approvals/services/passkeys.py).

import { postJSON } from "./http.js";

const CHALLENGES = "/api/v1/step-up/challenges/";
const VERDICTS = { approve: "approve", edit: "approve_with_edits" };

/**
 * Sign the decision `form` is about to send, when it asks for a passkey. Resolves to
 * null when the form may be sent, or to an error shape `{code, message}` to show instead.
 */
export async function signDecision(form) {
  const nonce = form.querySelector("input[name=passkey_nonce]");
  if (!nonce || nonce.closest("label").hidden) return null;
  const card = form.closest(".card");
  // A batch's "approve all": one assertion over the digest of every member it lists.
  const requests = form.dataset.batch
    ? Array.from(form.querySelectorAll("input[name=request]"), (field) => {
      const [id, revision] = field.value.split(":");
      return { id, revision: Number(revision) };
    })
    : [{ id: card.dataset.id, revision: Number(card.querySelector("input[name=revision]").value) }];
  const answer = await postJSON(CHALLENGES, { decision: VERDICTS[form.dataset.action], requests });
  if (!answer.ok) return answer.body;
  let credential;
  try {
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(answer.body.publicKey);
    credential = await navigator.credentials.get({ publicKey });
  } catch (error) {
    return { code: null, message: "Your passkey did not confirm this decision (" + error.name + "). Try again." };
  }
  form.querySelector("input[name=passkey_assertion]").value = JSON.stringify(credential.toJSON());
  nonce.value = answer.body.nonce;
  return null;
}
