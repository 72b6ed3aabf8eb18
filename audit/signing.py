"""Ed25519 signatures on every audit event: only the holder of the signing key appends.

The hash chain proves order and catches edits, but anyone who may INSERT can take
the append lock, read the head and compute `sha256(prev || canonical)` for a forged
row. So each row also carries a signature over its hash by a key that lives outside
the database: derived from the secret `AUDIT_SIGNING_KEY` (required outside DEBUG,
controlplane/keys.py), with its `key_id`.

Trust comes only from outside the database: the public keys pinned in
`AUDIT_PUBLIC_KEYS_FILE` (a deploy-time file), the server's own (derived from its
secret), and for the offline verifier the auditor's `--public-key`. The public-key
page and `manage.py audit_public_key` show them, for pinning; they are never a
source of trust.

Rotation: set `AUDIT_SIGNING_KEY` to the new secret and `AUDIT_PREVIOUS_SIGNING_KEY`
to the old one. The first append that finds the head signed by the previous key
first appends `audit.key_rotated`, signed by the previous key and naming the new
public key; later rows are signed by the new key, and rows signed by a retired key
fail verification. A process whose key the chain has moved past refuses to append.

Rows written before signing began stay unsigned (re-signing would bless any forgery
already made, and needs UPDATE): `manage.py audit_seal` verifies them once and
appends `audit.sealed`, signed, naming their head. Verification accepts unsigned
rows only before the first signed row, and only when a seal covers them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings

__all__ = [
    "KEY_ROTATED",
    "SEALED",
    "ChainMovedOn",
    "SignatureCheck",
    "SigningKey",
    "Signer",
    "parse_public_key",
    "pinned_public_keys",
    "public_key_text",
    "signer",
    "trusted_public_keys",
    "verify_signature",
]

KEY_ROTATED = "audit.key_rotated"
SEALED = "audit.sealed"
_PREFIX = "ed25519:"
# Domain separation: the secret may be any long random string; the key is derived from it.
_DERIVATION_LABEL = b"controlplane audit signing key v1\x00"


class ChainMovedOn(RuntimeError):
    """The chain's head is signed by a key this process does not hold: restart it with the current key."""


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
        public.verify(_unb64(signature), row_hash.encode("ascii"))
    except (InvalidSignature, binascii.Error, ValueError, UnicodeEncodeError):
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
        return _b64(self.private.sign(row_hash.encode("ascii")))


@dataclass(frozen=True)
class Signer:
    """The key new rows are signed with, and the one it replaces during a rotation."""

    current: SigningKey
    previous: SigningKey | None = None

    def rotation_from(self, head_key_id: str) -> SigningKey | None:
        """The previous key when the chain must first rotate to the current one, else None.

        Raises `ChainMovedOn` when the head is signed by a key this process does not know.
        """
        if head_key_id in ("", self.current.key_id):
            return None
        if self.previous is not None and head_key_id == self.previous.key_id:
            return self.previous
        raise ChainMovedOn(
            f"the audit chain's head is signed by key {head_key_id}, not this process's key "
            f"{self.current.key_id}: restart it with the current AUDIT_SIGNING_KEY"
        )

    def rotation_metadata(self) -> dict[str, str]:
        return {"from_key_id": self.previous.key_id if self.previous else "", "to_key_id": self.current.key_id,
                "to_public_key": self.current.public_text}


@lru_cache(maxsize=4)
def _signer(current: str, previous: str) -> Signer:
    return Signer(SigningKey.from_secret(current), SigningKey.from_secret(previous) if previous else None)


def signer() -> Signer:
    """This process's signer, from settings (derived once per key)."""
    return _signer(settings.AUDIT_SIGNING_KEY, getattr(settings, "AUDIT_PREVIOUS_SIGNING_KEY", "") or "")


def pinned_public_keys(path: Path | str | None = None) -> list[Ed25519PublicKey]:
    """The keys in the deploy-time file (one `ed25519:...` per line; # comments)."""
    path = Path(path or settings.AUDIT_PUBLIC_KEYS_FILE or "")
    if not str(path) or not path.is_file():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [parse_public_key(line) for line in lines if line]


def trusted_public_keys() -> list[Ed25519PublicKey]:
    """What `audit_verify` trusts: the pinned keys and the server's own (from its secrets)."""
    own = signer()
    keys = [*pinned_public_keys(), own.current.public]
    if own.previous is not None:
        keys.append(own.previous.public)
    return keys


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
            return (f"rows up to seq {seq} were written before signing began and are not sealed: "
                    "run `manage.py audit_seal` after checking them")
        return None


def _metadata(row: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        document = json.loads(row["canonical"])
    except (TypeError, ValueError):
        return {}
    metadata = document.get("metadata") if isinstance(document, dict) else None
    return metadata if isinstance(metadata, dict) else {}
