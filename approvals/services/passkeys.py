"""Step-up by passkey: a WebAuthn assertion, with user verification, over a challenge
the server derives from the decision(s) it is for, valid once.

allauth's own passkey sign-in uses random challenges; here the challenge is
HMAC(server key, person, nonce, digest of the decisions: (request, revision, verdict)
and the digest of the edits or the answer each carries; `step_up.decision_digest`), so
an assertion made for one decision cannot decide another, nor the same one with other
edits or another answer, and the nonce (issued by
`issue_challenge`, kept in the cache for `CHALLENGE_SECONDS`, deleted at its first use)
makes it valid once. Verification runs against the passkeys the person enrolled through
allauth.mfa, with fido2 (which allauth.mfa depends on).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from allauth.mfa.models import Authenticator
from django.conf import settings
from django.core.cache import cache
from fido2.server import Fido2Server
from fido2.utils import websafe_encode
from fido2.webauthn import PublicKeyCredentialRpEntity, UserVerificationRequirement

__all__ = ["CHALLENGE_SECONDS", "has_passkey", "issue_challenge", "verify_assertion"]

CHALLENGE_SECONDS = 300
_RP_NAME = "HITL control plane"


def _credentials(user: Any) -> list[Any]:
    found = []
    for authenticator in Authenticator.objects.filter(user_id=user.pk, type=Authenticator.Type.WEBAUTHN):
        credential = authenticator.wrap().authenticator_data.credential_data
        if credential:
            found.append(credential)
    return found


def has_passkey(user: Any) -> bool:
    return bool(Authenticator.objects.filter(user_id=user.pk, type=Authenticator.Type.WEBAUTHN).exists())


def _server(rp_id: str) -> Fido2Server:
    return Fido2Server(PublicKeyCredentialRpEntity(id=rp_id, name=_RP_NAME))


def _nonce_key(user: Any, nonce: str) -> str:
    return f"step-up-passkey:{user.pk}:{hashlib.sha256(nonce.encode()).hexdigest()}"


def _challenge(user: Any, nonce: str, digest: str) -> bytes:
    key = hashlib.sha256(f"controlplane.step-up.passkey\x00{settings.SECRET_KEY}".encode()).digest()
    return hmac.new(key, f"{user.pk}\n{nonce}\n{digest}".encode(), hashlib.sha256).digest()


def issue_challenge(user: Any, digest: str, *, rp_id: str) -> dict[str, Any]:
    """A fresh nonce and the `navigator.credentials.get()` options (JSON) for the decisions
    whose `decision_digest` is `digest`; empty `allowCredentials` never happens: callers
    ask only for people with a passkey."""
    nonce = secrets.token_urlsafe(24)
    cache.set(_nonce_key(user, nonce), 1, timeout=CHALLENGE_SECONDS)
    options, _state = _server(rp_id).authenticate_begin(
        credentials=_credentials(user),
        user_verification=UserVerificationRequirement.REQUIRED,
        challenge=_challenge(user, nonce, digest),
    )
    return {"nonce": nonce, "expires_in": CHALLENGE_SECONDS, **dict(options)}


def verify_assertion(user: Any, *, nonce: str, assertion: Any, digest: str, rp_id: str) -> str:
    """The id (base64url) of the passkey that signed `assertion` for exactly these
    decisions, with user verification; "" when it did not. The nonce is spent either way."""
    if not nonce or not isinstance(assertion, dict) or not cache.delete(_nonce_key(user, nonce)):
        return ""
    state = {
        "challenge": websafe_encode(_challenge(user, nonce, digest)),
        "user_verification": UserVerificationRequirement.REQUIRED,
    }
    try:
        credential = _server(rp_id).authenticate_complete(state, _credentials(user), assertion)
    except (ValueError, TypeError, KeyError):
        return ""
    return websafe_encode(credential.credential_id)
