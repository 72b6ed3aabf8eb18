"""A minimal OpenID provider on loopback for the fast identity tests: its discovery
document, its signing keys (JWKS), user info and a token endpoint, over real HTTP.

The browser tests use a full provider (`oidc-provider`, tests/identity/idp/); these
tests need to sign tokens the way an attacker would (another key, another audience),
so the provider's key is in the test's hands: `provider.sign(claims)`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["LocalProvider", "new_key"]

CLIENT_ID = "controlplane-tests"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalProvider:
    """`userinfo[access_token]` is the claims (a dict) or an HTTP status (int) it answers
    with; `token_responses` is what its token endpoint answers, in order."""

    def __init__(self) -> None:
        self.key = new_key()
        self.kid = "test-key-1"
        self.userinfo: dict[str, Any] = {}
        self.token_responses: list[dict[str, Any]] = []
        self.token_requests: list[dict[str, str]] = []
        self.jwks_fetches = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._answer(200, provider.discovery())
                elif self.path == "/jwks":
                    provider.jwks_fetches += 1
                    self._answer(200, provider.jwks())
                elif self.path == "/userinfo":
                    token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                    answer = provider.userinfo.get(token, 401)
                    if isinstance(answer, int):
                        self._answer(answer, {"error": "invalid_token"})
                    else:
                        self._answer(200, answer)
                else:
                    self._answer(404, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if self.path == "/token" and provider.token_responses:
                    provider.token_requests.append(form)
                    self._answer(200, provider.token_responses.pop(0))
                else:
                    self._answer(400, {"error": "invalid_grant"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def rotate_key(self, kid: str) -> None:
        self.key, self.kid = new_key(), kid

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{self.issuer}/jwks",
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
        }

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def app(self, provider_id: str = "local") -> dict[str, Any]:
        """This provider as an entry of SOCIALACCOUNT_PROVIDERS["openid_connect"]["APPS"]."""
        return {
            "provider_id": provider_id,
            "name": "Local",
            "client_id": CLIENT_ID,
            "secret": "local-secret",
            "settings": {"server_url": self.issuer, "token_auth_method": "client_secret_post"},
        }

    def sign(
        self,
        claims: dict[str, Any],
        *,
        key: Any = None,
        kid: str | None = None,
        algorithm: str = "RS256",
        headers: dict[str, Any] | None = None,
    ) -> str:
        return jwt.encode(
            claims,
            key if key is not None else self.key,
            algorithm=algorithm,
            headers={"kid": kid or self.kid, **(headers or {})},
        )

    def logout_claims(self, **overrides: Any) -> dict[str, Any]:
        """A valid logout token's claims, as the spec describes them; `None` drops one."""
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 120,
            "jti": uuid.uuid4().hex,
            "events": {"http://schemas.openid.net/event/backchannel-logout": {}},
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
