"""A passkey in software, for API tests that need real WebAuthn assertions without a
browser (the browser tests use Chromium's virtual authenticator instead).

It makes what an authenticator makes, by the WebAuthn spec, with fido2's own data
classes: a "none" attestation for enrollment (stored the way allauth.mfa stores it)
and, for a challenge, an assertion with user presence and verification flags, signed
with its P-256 key over authenticatorData || sha256(clientDataJSON).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from allauth.mfa.models import Authenticator
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.cose import ES256
from fido2.utils import websafe_decode, websafe_encode
from fido2.webauthn import (
    AttestationObject,
    AttestedCredentialData,
    AuthenticatorData,
    CollectedClientData,
)

__all__ = ["SoftPasskey"]

FLAGS = AuthenticatorData.FLAG


class SoftPasskey:
    def __init__(self, rp_id: str = "localhost") -> None:
        self.rp_id = rp_id
        self.origin = f"http://{rp_id}"
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.counter = 0

    def _rp_hash(self) -> bytes:
        return hashlib.sha256(self.rp_id.encode()).digest()

    def enroll(self, user: Any) -> Authenticator:
        """Stored as allauth.mfa stores a passkey registered through its pages."""
        public = ES256.from_cryptography_key(self.key.public_key())
        attested = AttestedCredentialData.create(b"\0" * 16, self.credential_id, public)
        auth_data = AuthenticatorData.create(self._rp_hash(), FLAGS.UP | FLAGS.UV | FLAGS.AT, 0, attested)
        client_data = CollectedClientData.create("webauthn.create", os.urandom(32), self.origin)
        credential = {
            "id": websafe_encode(self.credential_id),
            "rawId": websafe_encode(self.credential_id),
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": websafe_encode(client_data),
                "attestationObject": websafe_encode(AttestationObject.create("none", auth_data, {})),
            },
        }
        return Authenticator.objects.create(
            user=user, type=Authenticator.Type.WEBAUTHN, data={"name": "soft passkey", "credential": credential}
        )

    def assert_challenge(self, challenge: str, *, verified: bool = True) -> dict[str, Any]:
        """The assertion (AuthenticationResponseJSON) over a base64url `challenge`."""
        self.counter += 1
        flags = FLAGS.UP | (FLAGS.UV if verified else 0)
        auth_data = AuthenticatorData.create(self._rp_hash(), flags, self.counter)
        client_data = CollectedClientData.create("webauthn.get", websafe_decode(challenge), self.origin)
        signature = self.key.sign(bytes(auth_data) + client_data.hash, ec.ECDSA(hashes.SHA256()))
        return {
            "id": websafe_encode(self.credential_id),
            "rawId": websafe_encode(self.credential_id),
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": websafe_encode(client_data),
                "authenticatorData": websafe_encode(auth_data),
                "signature": websafe_encode(signature),
            },
        }

    def sign_options(self, options: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The assertion for the challenge of an answer of `POST /api/v1/step-up/challenges/`."""
        return self.assert_challenge(options["publicKey"]["challenge"], **kwargs)
