// A loopback OpenID Connect provider for the identity tests: the `oidc-provider` package
// with its development login and consent pages. Any password signs an account in; each
// account's claims (its groups) are read from ACCOUNTS_FILE at every request, so a test
// changes someone's groups by rewriting that file.
//
//   PORT=... CLIENT_ID=... CLIENT_SECRET=... REDIRECT_URI=... ACCOUNTS_FILE=... node server.mjs

import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const { PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, ACCOUNTS_FILE } = process.env;

function claimsOf(id) {
  const accounts = JSON.parse(readFileSync(ACCOUNTS_FILE, "utf8"));
  const account = accounts[id] || {};
  return { sub: id, preferred_username: id, name: account.name || id, groups: account.groups || [] };
}

const provider = new Provider(`http://localhost:${PORT}`, {
  clients: [{
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    redirect_uris: [REDIRECT_URI],
    grant_types: ["authorization_code"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_post",
  }],
  claims: { openid: ["sub"], profile: ["preferred_username", "name", "groups"] },
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => claimsOf(id) }),
  pkce: { required: () => false },
  cookies: { keys: ["identity-tests-only"] },
});
provider.proxy = false;
provider.listen(Number(PORT), "127.0.0.1", () => console.log(`idp listening on ${PORT}`));
