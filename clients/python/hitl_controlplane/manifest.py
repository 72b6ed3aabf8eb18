"""The export formats, their signed manifest, and signed chain-head checkpoints.

No Django on purpose: the server (the `audit` app) writes
exports with these functions and the offline verifier (`hitl_controlplane.verify`)
reads them with the same ones, without Django.

Formats
-------
JSON Lines: one object per event, written exactly as
    {"seq":7,"prev_hash":"...","hash":"...","event":<the hashed text>}
`event` is the canonical text that was hashed, spliced in byte for byte and last,
so a verifier recovers the hashed bytes as the text between the row's prefix and
its closing brace (`jsonl_hashed_text`) while jq and humans see a plain object.
The last line is {"manifest": {...}}. Exports written before this layout also
carried the text a second time as the string `canonical`; the verifier reads both.

CSV: the header `CSV_COLUMNS`, then one row per event with the document's fields
flattened, `metadata` as canonical JSON, and the chain columns. Cells that a
spreadsheet would run as a formula are neutralized (see `neutralize_cell`). The
manifest is a separate JSON document (the sidecar).

Manifest
--------
A JSON object (`MANIFEST_FIELDS`) naming the filters, the row count, the first and
last seq, `seq_digest` = sha256 over "<seq>\\n" for every exported seq in order,
`hash_digest` = sha256 over "<hash>\\n" for every exported row in order, and the
chain head when the export started. It is signed with HMAC-SHA256 over the
canonical bytes of the manifest without its `signature` member.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import EVENT_COLUMNS, canonical_bytes
from .ed25519 import SigningKey, key_id_of, verify_bytes

__all__ = [
    "CHECKPOINT_TYPE",
    "CSV_COLUMNS",
    "FORMULA_PREFIXES",
    "MANIFEST_TYPE",
    "ED25519_ALGORITHM",
    "VerifyingKey",
    "SIGNATURE_ALGORITHM",
    "ExportDigests",
    "csv_cells",
    "jsonl_hashed_text",
    "jsonl_line",
    "jsonl_lines",
    "key_id",
    "neutralize_cell",
    "restore_cell",
    "sign",
    "signature_problem",
]

MANIFEST_TYPE = "cp-audit-export-manifest/1"
CHECKPOINT_TYPE = "cp-audit-checkpoint/1"
SIGNATURE_ALGORITHM = "HMAC-SHA256"
ED25519_ALGORITHM = "Ed25519"

# Each row's Ed25519 signature over its hash, and the key's id (audit.ed25519), follow the
# event's columns; exports written before signing lack them and still verify.
SIGNATURE_COLUMNS = ("key_id", "signature")
CSV_COLUMNS = (*EVENT_COLUMNS, *SIGNATURE_COLUMNS)
UNSIGNED_CSV_COLUMNS = EVENT_COLUMNS

# A spreadsheet evaluates a cell starting with these as a formula (OWASP CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


# --- Rows --------------------------------------------------------------------------------


def jsonl_line(seq: int, prev_hash: str, row_hash: str, canonical: str, key_id: str = "", signature: str = "") -> str:
    """One JSON Lines row (with its newline) for a stored event.

    The canonical text is itself JSON, so it is spliced in as `event` without a
    parse or a second, escaped copy: escaping that copy was half the export's time
    and half its bytes. The row's signature and key id come before it.
    """
    return f"{_jsonl_prefix(seq, prev_hash, row_hash, key_id, signature)}{canonical}}}\n"


def _jsonl_prefix(
    seq: int, prev_hash: str, row_hash: str, key_id: str | None = None, signature: str | None = None
) -> str:
    if key_id is None:  # the layout before rows carried signatures
        return f'{{"seq":{seq},"prev_hash":"{prev_hash}","hash":"{row_hash}","event":'
    return (
        f'{{"seq":{seq},"prev_hash":"{prev_hash}","hash":"{row_hash}",'
        f'"key_id":"{key_id}","signature":"{signature}","event":'
    )


def jsonl_lines(rows: Sequence[tuple[int, str, str, str, str, str]]) -> str:
    """`jsonl_line` for a chunk of (seq, prev_hash, hash, canonical, key_id, signature) rows, joined.

    The export's hot loop, so the layout is written out here once more instead of
    costing two calls a row (a fifth of the rendering time, tests/perf/bench_audit_export);
    tests/audit/test_export.py holds it equal to `jsonl_line`.
    """
    return "".join(
        [
            f'{{"seq":{seq},"prev_hash":"{prev}","hash":"{row_hash}","key_id":"{key_id}","signature":"{signature}",'
            f'"event":{canonical}}}\n'
            for seq, prev, row_hash, canonical, key_id, signature in rows
        ]
    )


def jsonl_hashed_text(line: str, row: Mapping[str, Any]) -> str | None:
    """The exact text `row`'s event was spliced from in `line` (the parsed line), or
    None when the line is not laid out byte for byte as `jsonl_line` writes it
    (re-serialized by a tool, keys reordered, whitespace added)."""
    body = line[:-1] if line.endswith("\n") else line
    prefix = _jsonl_prefix(row["seq"], row["prev_hash"], row["hash"], row.get("key_id"), row.get("signature"))
    if not body.startswith(prefix) or not body.endswith("}"):
        return None
    return body[len(prefix) : -1]


def restore_cell(cell: str) -> str:
    """The value `neutralize_cell` was given (a signature may start with '-')."""
    if cell.startswith("'") and cell[1:].startswith(FORMULA_PREFIXES):
        return cell[1:]
    return cell


def neutralize_cell(value: str) -> str:
    """Prefix a single quote to a cell a spreadsheet would treat as a formula.

    The one CSV cell guard of the project (the metrics CSV uses it too); here because
    the offline verifier, which must import no Django, needs it as well.
    """
    if value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def csv_cells(document: Mapping[str, Any], prev_hash: str, row_hash: str, canonical: str, *signature: str) -> list[str]:
    """The CSV cells of one event, derived from its canonical document, neutralized.

    Raises KeyError/TypeError when `document` is not shaped like an event document;
    the verifier turns that into a rejection of the row.
    """
    actor = document["actor"]
    request_id = document["request_id"]
    agent_id = document["agent_id"]
    cells = [
        str(document["seq"]),
        document["occurred_at"],
        actor["kind"],
        actor["id"],
        actor["label"],
        document["verb"],
        "" if request_id is None else str(request_id),
        "" if agent_id is None else str(agent_id),
        canonical_bytes(document["metadata"]).decode("utf-8"),
        prev_hash,
        row_hash,
        canonical,
        *signature,
    ]
    return [neutralize_cell(cell) for cell in cells]


class ExportDigests:
    """Accumulates the manifest's digests as rows stream past, in constant memory."""

    def __init__(self) -> None:
        self._seqs = hashlib.sha256()
        self._hashes = hashlib.sha256()
        self.row_count = 0
        self.first_seq: int | None = None
        self.last_seq: int | None = None

    def add(self, seq: int, row_hash: str) -> None:
        self._seqs.update(f"{seq}\n".encode("ascii"))
        self._hashes.update(f"{row_hash}\n".encode("ascii"))
        self.row_count += 1
        if self.first_seq is None:
            self.first_seq = seq
        self.last_seq = seq

    def add_many(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """`add` for a chunk of (seq, prev_hash, hash, ...) rows in order: the same
        digests, one hash update per chunk."""
        if not rows:
            return
        self._seqs.update(("\n".join([str(row[0]) for row in rows]) + "\n").encode("ascii"))
        self._hashes.update(("\n".join([row[2] for row in rows]) + "\n").encode("ascii"))
        self.row_count += len(rows)
        if self.first_seq is None:
            self.first_seq = rows[0][0]
        self.last_seq = rows[-1][0]

    def as_manifest_fields(self) -> dict[str, Any]:
        return {
            "row_count": self.row_count,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "seq_digest": self._seqs.hexdigest(),
            "hash_digest": self._hashes.hexdigest(),
        }


# --- Signatures ----------------------------------------------------------------------------


def _key_bytes(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


def key_id(key: str | bytes) -> str:
    """A short public fingerprint of a signing key, so a verifier can tell it holds the right one."""
    return hmac.new(_key_bytes(key), b"cp-audit-key-id", hashlib.sha256).hexdigest()[:16]


def _signed_bytes(document: Mapping[str, Any]) -> bytes:
    return canonical_bytes({name: value for name, value in document.items() if name != "signature"})


# What verifies a signature: an HMAC secret (older exports and checkpoints), or the
# Ed25519 public keys the auditor pinned (everything signed since).
VerifyingKey = str | bytes | Sequence[Ed25519PublicKey]


def sign(document: Mapping[str, Any], key: str | bytes | SigningKey) -> dict[str, Any]:
    """Return `document` with a `signature` member over everything else in it.

    The document must be canonicalizable (no floats); the signature is over its
    canonical bytes without `signature`: Ed25519 with the server's `SigningKey`
    (what the server signs with), or HMAC-SHA256 with a secret (kept for tests of
    older files).
    """
    signed = {name: value for name, value in document.items() if name != "signature"}
    if isinstance(key, SigningKey):
        value = key.sign_bytes(_signed_bytes(signed))
        signed["signature"] = {"alg": ED25519_ALGORITHM, "key_id": key.key_id, "value": value}
        return signed
    value = hmac.new(_key_bytes(key), _signed_bytes(signed), hashlib.sha256).hexdigest()
    signed["signature"] = {"alg": SIGNATURE_ALGORITHM, "key_id": key_id(key), "value": value}
    return signed


def signature_problem(document: Mapping[str, Any], key: VerifyingKey) -> str | None:
    """Return why `document`'s signature does not hold under `key`, or None when it does.

    `key`: the Ed25519 public keys trusted (for Ed25519 signatures), or the HMAC secret.
    """
    signature = document.get("signature")
    if not isinstance(signature, Mapping):
        return "it carries no signature"
    alg = signature.get("alg")
    try:
        signed_bytes = _signed_bytes(document)
    except (TypeError, ValueError) as exc:
        return f"it cannot be canonicalized: {exc}"
    if alg == ED25519_ALGORITHM:
        if isinstance(key, (str, bytes)):
            return "it is signed with Ed25519: verify it with the server's public key (--public-key)"
        trusted = {key_id_of(public): public for public in key}
        public = trusted.get(str(signature.get("key_id", "")))
        if public is None:
            return (
                f"it was signed with key {signature.get('key_id')!r}, which is not among the public keys "
                f"given ({', '.join(sorted(trusted)) or 'none'})"
            )
        if not verify_bytes(public, signed_bytes, str(signature.get("value", ""))):
            return "the signature does not match its contents (altered, or signed with another key)"
        return None
    if alg != SIGNATURE_ALGORITHM:
        return f"unsupported signature algorithm {alg!r}"
    if not isinstance(key, (str, bytes)):
        return "it is signed with an HMAC key (an older file): verify it with that key (--key-file)"
    if signature.get("key_id") != key_id(key):
        return f"it was signed with key {signature.get('key_id')!r}, not the key given ({key_id(key)})"
    expected = hmac.new(_key_bytes(key), signed_bytes, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(str(signature.get("value", "")), expected):
        return "the signature does not match its contents (altered, or signed with another key)"
    return None
