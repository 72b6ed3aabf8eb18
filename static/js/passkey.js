// Step-up by passkey for a card's decision: fetch a challenge made for exactly this
// (request, revision, verdict, and the edits or the answer the form carries), have the browser sign it with the reviewer's passkey
// (user verification required), and put the assertion in the form's hidden fields.
// The server checks it once, for this decision only (approvals/services/passkeys.py).
// A reviewer who signs in only through an identity provider confirms there instead:
// the challenge's address opens in a window, the provider asks them to sign in again,
// and the window closes itself (approvals/services/provider_step_up.py).

import { postFields, postJSON } from "./http.js";

const CHALLENGES = "/api/v1/step-up/challenges/";
const VERDICTS = { approve: "approve", edit: "approve_with_edits", respond: "respond" };

/**
 * Sign the decision `form` is about to send, when it asks for a passkey. Resolves to
 * null when the form may be sent, or to an error shape `{code, message}` to show instead.
 */
export async function signDecision(form) {
  const atProvider = form.querySelector("input[name=provider_nonce]");
  if (atProvider && !atProvider.closest("label").hidden) return confirmAtProvider(form, atProvider);
  const nonce = form.querySelector("input[name=passkey_nonce]");
  if (!nonce || nonce.closest("label").hidden) return null;
  const answer = await challengeFor(form);
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

function challengeFor(form) {
  // A batch's "approve all": one proof over the digest of every member it lists.
  if (form.dataset.batch) {
    const requests = Array.from(form.querySelectorAll("input[name=request]"), (field) => {
      const [id, revision] = field.value.split(":");
      return { id, revision: Number(revision) };
    });
    return postJSON(CHALLENGES, { decision: VERDICTS[form.dataset.action], requests });
  }
  // One card's decision: its own fields (the revision, and the edits or the answer exactly
  // as the server will read them), so the proof binds what this form sends and nothing else.
  return postFields(form.dataset.challenge, form, { decision: form.dataset.action });
}

const DONE = "/accounts/step-up/provider/done/";
const POLL_MS = 1000;

async function confirmAtProvider(form, nonce) {
  // Opened before the challenge is fetched, while the click still counts as a user gesture.
  const popup = window.open("about:blank", "provider-step-up", "popup,width=520,height=720");
  if (!popup) return { code: null, message: "Allow this site to open a window: your identity provider asks there." };
  const answer = await challengeFor(form);
  if (!answer.ok) {
    popup.close();
    return answer.body;
  }
  popup.location.href = answer.body.redirect + "?next=" + encodeURIComponent(DONE);
  // Once the window has gone to the provider this page cannot see it (opener policy),
  // so it asks the server until the sign-in there has proven the challenge.
  const status = answer.body.redirect + "status/";
  const deadline = Date.now() + answer.body.expires_in * 1000;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    const seen = await fetch(status, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    const body = seen.ok ? await seen.json() : { pending: false };
    if (body.proven) {
      nonce.value = answer.body.nonce;
      return null;
    }
    if (!body.pending) break;
  }
  return { code: null, message: "Your identity provider did not confirm this decision. Try again." };
}
