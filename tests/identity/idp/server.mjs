// A loopback OpenID Connect provider for the identity tests: the `oidc-provider` package
// with its development login and consent pages. Any password signs an account in; each
// account's claims (its groups) are read from ACCOUNTS_FILE at every request, so a test
// changes someone's groups by rewriting that file, and removes someone (`"disabled": true`:
// the provider no longer knows them, so its user info answers 401).
//
// Back-channel logout is on: signing out here (GET /session/end, "Yes, sign me out") POSTs
// a logout token naming the sub and sid to BACKCHANNEL_URI. ID tokens always carry
// auth_time; `prompt=login` / `max_age=0` ask for the password again.
//
//   PORT=... CLIENT_ID=... CLIENT_SECRET=... REDIRECT_URI=... BACKCHANNEL_URI=... ACCOUNTS_FILE=... node server.mjs

import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const { PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, BACKCHANNEL_URI, ACCOUNTS_FILE } = process.env;

function accountOf(id) {
  return JSON.parse(readFileSync(ACCOUNTS_FILE, "utf8"))[id] || {};
}

function claimsOf(id) {
  const account = accountOf(id);
  return { sub: id, preferred_username: id, name: account.name || id, groups: account.groups || [] };
}

const provider = new Provider(`http://localhost:${PORT}`, {
  clients: [{
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    redirect_uris: REDIRECT_URI.split(","),  // sign-in, and the step-up's own callback
    grant_types: ["authorization_code"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_post",
    require_auth_time: true,
    ...(BACKCHANNEL_URI ? { backchannel_logout_uri: BACKCHANNEL_URI, backchannel_logout_session_required: true } : {}),
  }],
  features: { backchannelLogout: { enabled: true } },
  claims: { openid: ["sub"], profile: ["preferred_username", "name", "groups"] },
  findAccount: async (ctx, id) => (accountOf(id).disabled ? undefined
    : { accountId: id, claims: async () => claimsOf(id) }),
  pkce: { required: () => false },
  // The control plane is on loopback too, which oidc-provider's outgoing requests refuse
  // (SSRF protection); a test machine under load also needs more than its 2.5 s.
  fetch: (url, options) => {
    delete options.dispatcher;
    return fetch(url, { ...options, signal: AbortSignal.timeout(20000) });
  },
  cookies: { keys: ["identity-tests-only"] },
});
provider.proxy = false;
provider.on("backchannel.success", (ctx, client, accountId, sid) => console.log(`backchannel logout sent: ${accountId} ${sid}`));
provider.on("backchannel.error", (ctx, err) => console.log(`backchannel logout failed: ${err}`));
provider.listen(Number(PORT), "127.0.0.1", () => console.log(`idp listening on ${PORT}`));
