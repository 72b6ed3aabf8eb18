"""Ed25519 keys and signatures, in plain Python (no Django): the server signs with
them (audit.signing) and the offline verifier checks with them (audit.verify).

A public key is written `ed25519:<base64url of the 32 raw bytes>`; its key id is the
first 16 hex digits of the SHA-256 of those bytes. The server's private key is
derived from a secret (`SigningKey.from_secret`), so deployments manage one random
string like their other secrets.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = ["SigningKey", "key_id_of", "parse_public_key", "public_key_text", "verify_bytes", "verify_signature"]

_PREFIX = "ed25519:"
# Domain separation: the secret may be any long random string; the key is derived from it.
_DERIVATION_LABEL = b"controlplane audit signing key v1\x00"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key_text(public: Ed25519PublicKey) -> str:
    return _PREFIX + _b64(public.public_bytes(Encoding.Raw, PublicFormat.Raw))


def parse_public_key(text: str) -> Ed25519PublicKey:
    """`ed25519:<base64url raw key>`, as `audit_public_key` prints it. Raises ValueError."""
    text = text.strip()
    if not text.startswith(_PREFIX):
        raise ValueError(f"a public key starts with {_PREFIX!r}")
    try:
        raw = _unb64(text[len(_PREFIX):])
    except (binascii.Error, ValueError):
        raise ValueError("the public key is not base64url") from None
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def key_id_of(public: Ed25519PublicKey) -> str:
    return hashlib.sha256(public.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()[:16]


def verify_signature(public: Ed25519PublicKey, row_hash: str, signature: str) -> bool:
    try:
        return verify_bytes(public, row_hash.encode("ascii"), signature)
    except UnicodeEncodeError:
        return False


def verify_bytes(public: Ed25519PublicKey, data: bytes, signature: str) -> bool:
    try:
        public.verify(_unb64(signature), data)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


@dataclass(frozen=True)
class SigningKey:
    private: Ed25519PrivateKey
    public: Ed25519PublicKey
    key_id: str

    @classmethod
    def from_secret(cls, secret: str) -> SigningKey:
        seed = hashlib.sha256(_DERIVATION_LABEL + secret.encode("utf-8")).digest()
        private = Ed25519PrivateKey.from_private_bytes(seed)
        public = private.public_key()
        return cls(private=private, public=public, key_id=key_id_of(public))

    @property
    def public_text(self) -> str:
        return public_key_text(self.public)

    def sign(self, row_hash: str) -> str:
        return self.sign_bytes(row_hash.encode("ascii"))

    def sign_bytes(self, data: bytes) -> str:
        return _b64(self.private.sign(data))
