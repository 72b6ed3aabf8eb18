"""Ed25519 keys and signatures, in plain Python (no Django): the server signs with
them (the `audit` app's signing), the offline verifier (verify.py) and the client (decision
signatures) check with them.

A public key is written `ed25519:<base64url of the 32 raw bytes>`; its key id is the
first 16 hex digits of the SHA-256 of those bytes. The server's private key is
derived from a secret (`SigningKey.from_secret`), so deployments manage one random
string like their other secrets.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = [
    "KEY_ROTATED",
    "SEALED",
    "SignatureCheck",
    "SigningKey",
    "key_id_of",
    "parse_public_key",
    "public_key_text",
    "verify_bytes",
    "verify_signature",
]

# The two events that change what the signature walk trusts (audit.signing explains both).
KEY_ROTATED = "audit.key_rotated"
SEALED = "audit.sealed"

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
        raw = _unb64(text[len(_PREFIX) :])
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


@dataclass
class SignatureCheck:
    """A `row_check` for `verify_rows`: every row signed by a trusted, unretired key.

    Rows need `seq`, `hash`, `verb`, `canonical`, `key_id` and `signature`. Call
    `finish()` after the walk: unsigned rows never covered by a seal fail there.
    """

    trusted: dict[str, Ed25519PublicKey] = field(default_factory=dict)
    retired: set[str] = field(default_factory=set)
    signing_began: bool = False
    unsealed_head: tuple[int, str] | None = None  # the last unsigned row, until a seal covers it
    signed: int = 0  # rows whose signature held
    used: set[str] = field(default_factory=set)  # the key ids they were signed with
    without_columns: int = 0  # rows of an older export layout, with no signature to check

    @classmethod
    def trusting(cls, keys: Iterable[Ed25519PublicKey]) -> SignatureCheck:
        return cls(trusted={key_id_of(key): key for key in keys})

    def __call__(self, row: Mapping[str, Any]) -> str | None:
        if not row.get("signature"):
            if self.signing_began:
                return "the row is not signed, though signing began before it (inserted without the signing key)"
            self.unsealed_head = (row["seq"], row["hash"])
            return None
        key_id = row.get("key_id") or ""
        if key_id in self.retired:
            return f"signed by key {key_id}, retired by an earlier audit.key_rotated"
        public = self.trusted.get(key_id)
        if public is None:
            return f"signed by key {key_id}, which is not trusted (not pinned, not introduced by a trusted rotation)"
        if not verify_signature(public, row["hash"], row["signature"]):
            return "the signature does not match the row's hash (forged, or copied from another row)"
        self.signing_began = True
        self.signed += 1
        self.used.add(key_id)
        return self._follow(row, key_id)

    def _follow(self, row: Mapping[str, Any], key_id: str) -> str | None:
        if row.get("verb") not in (KEY_ROTATED, SEALED):
            return None
        metadata = _metadata(row)
        if row["verb"] == SEALED:
            if self.unsealed_head is not None and [metadata.get("sealed_seq"), metadata.get("sealed_hash")] == list(
                self.unsealed_head
            ):
                self.unsealed_head = None
            return None
        try:
            introduced = parse_public_key(str(metadata.get("to_public_key", "")))
        except ValueError as exc:
            return f"the rotation names no valid public key: {exc}"
        if key_id_of(introduced) != metadata.get("to_key_id"):
            return "the rotation's key id does not match the public key it names"
        self.trusted[key_id_of(introduced)] = introduced
        self.retired.add(key_id)
        return None

    def finish(self) -> str | None:
        if self.unsealed_head is not None:
            seq = self.unsealed_head[0]
            return (
                f"rows up to seq {seq} were written before signing began and are not sealed: "
                "run `manage.py audit_seal` after checking them"
            )
        return None


def _metadata(row: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        document = json.loads(row["canonical"])
    except (TypeError, ValueError):
        return {}
    metadata = document.get("metadata") if isinstance(document, dict) else None
    return metadata if isinstance(metadata, dict) else {}
