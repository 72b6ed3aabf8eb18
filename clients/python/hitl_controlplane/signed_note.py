"""C2SP signed notes, checkpoints and Ed25519 cosignatures, in plain Python (no Django).

Written from the C2SP texts `signed-note`, `tlog-checkpoint` and `tlog-cosignature`
(cosignature/v1); the Go checksum database's `golang.org/x/mod/sumdb/note` cross-checks
the notes in the tests. The server signs checkpoints with it, the witness
(`hitl_controlplane.witness`) cosigns with it, and verifiers check both with it.

A note is its body (UTF-8 text, every line newline-terminated), one blank line, and one
or more signature lines `— <key name> <base64(4-byte key hash || signature)>`.

- The log's signature is Ed25519 (signature type 0x01) over the body; its key hash is
  SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4].
- A cosignature (type 0x04) is Ed25519 over `cosignature/v1\\ntime <unix seconds>\\n` || body;
  its signature field is the 8-byte big-endian timestamp then the 64-byte signature; its
  key hash is SHA-256(name || 0x0A || 0x04 || public key)[:4].
- A checkpoint body is the origin line, the tree size in decimal, the base64 root hash.
- Verifier keys ("vkeys") are `<name>+<8 hex digits of key hash>+<base64(type || public key)>`.

Ed25519 itself comes from `cryptography`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = [
    "COSIGNATURE_V1",
    "ED25519",
    "MAX_NOTE_BYTES",
    "Checkpoint",
    "NoteError",
    "NoteKey",
    "Signature",
    "checkpoint_body",
    "cosignature_message",
    "join_note",
    "key_hash",
    "parse_checkpoint",
    "split_note",
]

ED25519 = 0x01  # a log's note signature
COSIGNATURE_V1 = 0x04  # a witness's Ed25519 cosignature
MAX_NOTE_BYTES = 16_384  # a checkpoint with a few dozen cosignatures is ~3 KiB
SIGNATURE_PREFIX = "\u2014 "  # EM DASH, space
_PRIVATE_PREFIX = "PRIVATE+KEY+"


class NoteError(ValueError):
    """Text that is not a well-formed note, checkpoint or key."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise NoteError("not standard base64") from None


def _check_name(name: str) -> str:
    if not name or any(c.isspace() or c == "+" for c in name) or not name.isprintable():
        raise NoteError(f"a key name is non-empty printable text without spaces or '+': {name!r}")
    return name


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_hash(name: str, kind: int, public: Ed25519PublicKey) -> bytes:
    """SHA-256(name || "\\n" || type || public key)[:4]: the key hash a signature line starts with."""
    return hashlib.sha256(_check_name(name).encode("utf-8") + b"\n" + bytes([kind]) + _raw(public)).digest()[:4]


def cosignature_message(body: str, timestamp: int) -> bytes:
    """What a cosignature/v1 signs: the header line, the time line, then the whole note body."""
    if not 0 <= timestamp < 2**63:
        raise NoteError("a cosignature time is 0 <= t < 2**63")
    return f"cosignature/v1\ntime {timestamp}\n".encode("ascii") + body.encode("utf-8")


@dataclass(frozen=True)
class NoteKey:
    """A named Ed25519 key of one signature type (ED25519 for logs, COSIGNATURE_V1 for witnesses)."""

    name: str
    kind: int
    public: Ed25519PublicKey
    private: Ed25519PrivateKey | None = None

    @classmethod
    def generate(cls, name: str, kind: int) -> NoteKey:
        private = Ed25519PrivateKey.generate()
        return cls(_check_name(name), kind, private.public_key(), private)

    @classmethod
    def from_private(cls, name: str, kind: int, private: Ed25519PrivateKey) -> NoteKey:
        return cls(_check_name(name), kind, private.public_key(), private)

    @property
    def key_hash(self) -> bytes:
        return key_hash(self.name, self.kind, self.public)

    @property
    def vkey(self) -> str:
        """`<name>+<hex key hash>+<base64(type || key)>`, the form `note.NewVerifier` reads."""
        return f"{self.name}+{self.key_hash.hex()}+{_b64(bytes([self.kind]) + _raw(self.public))}"

    @classmethod
    def parse_vkey(cls, text: str) -> NoteKey:
        name, hash_hex, material = _three(text.strip(), "verifier key")
        raw = _unb64(material)
        if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE_V1):
            raise NoteError("a verifier key holds a type byte (0x01 or 0x04) and a 32-byte Ed25519 key")
        key = cls(_check_name(name), raw[0], Ed25519PublicKey.from_public_bytes(raw[1:]))
        if key.key_hash.hex() != hash_hex.lower():
            raise NoteError("the verifier key's hash does not match its name and key")
        return key

    def private_text(self) -> str:
        """`PRIVATE+KEY+<name>+<hex key hash>+<base64(type || seed)>`, for the key's own file only."""
        if self.private is None:
            raise NoteError("no private key")
        seed = self.private.private_bytes_raw()
        return f"{_PRIVATE_PREFIX}{self.name}+{self.key_hash.hex()}+{_b64(bytes([self.kind]) + seed)}"

    @classmethod
    def parse_private(cls, text: str) -> NoteKey:
        text = text.strip()
        if not text.startswith(_PRIVATE_PREFIX):
            raise NoteError(f"a private key starts with {_PRIVATE_PREFIX}")
        name, hash_hex, material = _three(text[len(_PRIVATE_PREFIX) :], "private key")
        raw = _unb64(material)
        if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE_V1):
            raise NoteError("a private key holds a type byte and a 32-byte Ed25519 seed")
        key = cls.from_private(name, raw[0], Ed25519PrivateKey.from_private_bytes(raw[1:]))
        if key.key_hash.hex() != hash_hex.lower():
            raise NoteError("the private key's hash does not match its name and key")
        return key

    # --- Signing and checking -------------------------------------------------------

    def sign(self, body: str, timestamp: int | None = None) -> Signature:
        """This key's signature line for `body` (a cosignature needs the `timestamp`)."""
        if self.private is None:
            raise NoteError("no private key")
        _check_body(body)
        if self.kind == COSIGNATURE_V1:
            if timestamp is None:
                raise NoteError("a cosignature needs its time")
            raw = struct.pack(">Q", timestamp) + self.private.sign(cosignature_message(body, timestamp))
        else:
            raw = self.private.sign(body.encode("utf-8"))
        return Signature(self.name, self.key_hash, raw)

    def verifies(self, body: str, signature: Signature) -> bool:
        """Whether `signature` is this key's valid signature over `body` (name, key hash and bytes)."""
        if signature.name != self.name or signature.key_hash != self.key_hash:
            return False
        if self.kind == COSIGNATURE_V1:
            if len(signature.raw) != 72:
                return False
            message = cosignature_message(body, signature.timestamp or 0)
            raw = signature.raw[8:]
        else:
            message, raw = body.encode("utf-8"), signature.raw
        try:
            self.public.verify(raw, message)
        except InvalidSignature:
            return False
        return True


def _three(text: str, what: str) -> tuple[str, str, str]:
    parts = text.split("+", 2)  # base64 may hold "+"; names and key hashes never do
    if len(parts) != 3 or len(parts[1]) != 8:
        raise NoteError(f"a {what} is <name>+<8 hex digits>+<base64>")
    try:
        bytes.fromhex(parts[1])
    except ValueError:
        raise NoteError(f"a {what}'s key hash is 8 hex digits") from None
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class Signature:
    """One signature line: key name, 4-byte key hash, and the signature bytes after it."""

    name: str
    key_hash: bytes
    raw: bytes

    @property
    def timestamp(self) -> int | None:
        """A cosignature's time (its first 8 bytes, big-endian); None when too short to be one."""
        return struct.unpack(">Q", self.raw[:8])[0] if len(self.raw) == 72 else None

    @property
    def line(self) -> str:
        return f"{SIGNATURE_PREFIX}{self.name} {_b64(self.key_hash + self.raw)}\n"

    @classmethod
    def parse_line(cls, line: str) -> Signature:
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError("a signature line starts with an em dash and a space")
        name, space, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not space or " " in encoded:
            raise NoteError("a signature line is '— <name> <base64>'")
        raw = _unb64(encoded)
        if len(raw) < 5:
            raise NoteError("a signature holds a 4-byte key hash and the signature")
        return cls(_check_name(name), raw[:4], raw[4:])


def _check_body(body: str) -> None:
    if not body.endswith("\n") or "\n\n" in body or body.startswith("\n"):
        raise NoteError("a note body is non-empty newline-terminated lines, none of them empty")
    if any(not line.isprintable() for line in body.split("\n")):
        raise NoteError("a note body holds printable text only")


def split_note(text: str) -> tuple[str, list[Signature]]:
    """(body, signatures) of a note; raises NoteError on anything else."""
    if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
        raise NoteError(f"a note is at most {MAX_NOTE_BYTES} bytes")
    body, blank, rest = text.rpartition("\n\n")
    if not blank or not rest.endswith("\n"):
        raise NoteError("a note is its body, a blank line, and newline-terminated signature lines")
    body += "\n"
    _check_body(body)
    signatures = [Signature.parse_line(line) for line in rest[:-1].split("\n")]
    return body, signatures


def join_note(body: str, signatures: list[Signature]) -> str:
    _check_body(body)
    if not signatures:
        raise NoteError("a note has at least one signature")
    return body + "\n" + "".join(signature.line for signature in signatures)


@dataclass(frozen=True)
class Checkpoint:
    """A tlog-checkpoint body: origin, tree size, root hash, and any extension lines."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    @property
    def body(self) -> str:
        return checkpoint_body(self.origin, self.size, self.root_hash, self.extensions)


def checkpoint_body(origin: str, size: int, root_hash: bytes, extensions: tuple[str, ...] = ()) -> str:
    if not origin or not origin.isprintable() or size < 0 or len(root_hash) != 32:
        raise NoteError("a checkpoint has an origin line, a size >= 0 and a 32-byte root hash")
    body = f"{origin}\n{size}\n{_b64(root_hash)}\n" + "".join(f"{line}\n" for line in extensions)
    _check_body(body)
    return body


def parse_checkpoint(body: str) -> Checkpoint:
    _check_body(body)
    lines = body[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError("a checkpoint body has at least three lines")
    origin, size, root = lines[0], lines[1], lines[2]
    if not (size.isascii() and size.isdigit()) or (size != "0" and size.startswith("0")) or len(size) > 19:
        raise NoteError("a checkpoint's size is a decimal without leading zeros")
    root_hash = _unb64(root)
    if len(root_hash) != 32:
        raise NoteError("a checkpoint's root hash is 32 bytes")
    return Checkpoint(origin, int(size), root_hash, tuple(lines[3:]))
