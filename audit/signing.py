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

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings

from hitl_controlplane.ed25519 import (
    KEY_ROTATED,
    SEALED,
    SignatureCheck,
    SigningKey,
    parse_public_key,
    public_key_text,
    verify_signature,
)

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


class ChainMovedOn(RuntimeError):
    """The chain's head is signed by a key this process does not hold: restart it with the current key."""


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
        return {
            "from_key_id": self.previous.key_id if self.previous else "",
            "to_key_id": self.current.key_id,
            "to_public_key": self.current.public_text,
        }


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
