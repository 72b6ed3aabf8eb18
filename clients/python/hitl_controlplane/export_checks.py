"""The offline verifier's checks of one audit export (`verify_export` -> `Verdict`): each row on
its own, the chain where the export is unfiltered, the manifest and its signature against the
rows received, and a signed checkpoint. The command line is `hitl_controlplane.verify`, which
re-exports these names; what is checked, and how it fails closed, is described there.

Imports nothing from Django or the server.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import GENESIS_HASH, chain_hash
from .ed25519 import SignatureCheck, key_id_of
from .export_assurance import TreeEvidence, TreePins
from .export_files import Rejected, csv_rows, detect_format, jsonl_rows, read_trailer
from .manifest import (
    CHECKPOINT_TYPE,
    CSV_COLUMNS,
    MANIFEST_TYPE,
    ExportDigests,
    VerifyingKey,
    csv_cells,
    signature_problem,
)

__all__ = ["Verdict", "load_checkpoint", "verify_export"]

_NOT_CHECKED = "signatures NOT checked"


@dataclass(frozen=True)
class Verdict:
    """The outcome: `ok`, a one-line `message`, and the first bad seq when one can be named."""

    ok: bool
    message: str
    bad_seq: int | None = None
    rows: int = 0
    # False when no key was given: `ok` is then False too unless the caller passed
    # `no_signatures=True` (the export is only internally consistent, not authentic).
    signatures_checked: bool = True
    # `unsigned`, `signed` or `witnessed` (hitl_controlplane.export_assurance); None when it failed.
    assurance: str | None = None


def _row_problem(row: Mapping[str, Any], fmt: str) -> str | None:
    """Why this row is not internally consistent, or None.

    Consistent means: its hash recomputes from its prev_hash and canonical text,
    the canonical document names the row's seq, and every other column says what
    the canonical document says.
    """
    seq, canonical = row["seq"], row["canonical"]
    if not isinstance(seq, int) or isinstance(seq, bool):
        return f"seq {seq!r} is not an integer"
    if not isinstance(canonical, str) or not isinstance(row["prev_hash"], str) or not isinstance(row["hash"], str):
        return "prev_hash, hash and canonical must be strings"
    try:
        recomputed = chain_hash(row["prev_hash"], canonical.encode("utf-8"))
    except UnicodeEncodeError:
        return "canonical text is not valid UTF-8"
    except UnicodeError:
        return "prev_hash is not ASCII"
    if recomputed != row["hash"]:
        return f"stored hash {row['hash']} does not match recomputed hash {recomputed}"
    try:
        document = json.loads(canonical)
    except json.JSONDecodeError:
        return "canonical text is not JSON"
    if not isinstance(document, dict) or document.get("seq") != seq:
        named = document.get("seq") if isinstance(document, dict) else None
        return f"canonical document names seq {named!r}, row is seq {seq}"
    if fmt == "jsonl":
        if row["event"] != document:
            return "the event object differs from the canonical text that was hashed"
        return None
    try:
        signature = (row["key_id"], row["signature"]) if "key_id" in row else ()
        expected = csv_cells(document, row["prev_hash"], row["hash"], canonical, *signature)
    except (KeyError, TypeError, ValueError) as exc:
        return f"canonical document is not an event document ({exc})"
    for column, want, got in zip(CSV_COLUMNS, expected, row["cells"]):
        if want != got:
            return f"column {column} differs from the canonical text that was hashed"
    return None


def _check_manifest_shape(manifest: Mapping[str, Any]) -> None:
    if manifest.get("type") != MANIFEST_TYPE:
        raise Rejected(f"the manifest's type is {manifest.get('type')!r}, not {MANIFEST_TYPE!r}")
    for name, kind in (
        ("filters", dict),
        ("row_count", int),
        ("seq_digest", str),
        ("hash_digest", str),
        ("chain_head", dict),
    ):
        if not isinstance(manifest.get(name), kind):
            raise Rejected(f"the manifest's {name} is missing or malformed")


def verify_export(
    path: str | os.PathLike[str],
    *,
    manifest: Mapping[str, Any] | None = None,
    key: VerifyingKey | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    fmt: str | None = None,
    no_signatures: bool = False,
    pins: TreePins | None = None,
) -> Verdict:
    """Verify one export file; see the module docstring for what is checked.

    `manifest` is the CSV sidecar (a JSONL export carries its own trailer, which a
    given manifest overrides). `key`: the Ed25519 public keys the auditor pinned
    (or, for older files, the HMAC secret). Without it the signatures are not checked,
    and the verdict fails closed (`ok` False, "UNVERIFIED: ...") unless the caller
    says `no_signatures=True`. Reads the file once, row by row, in constant memory.
    """
    path = Path(path)
    pins = pins or TreePins()
    if key is None and pins.log_keys:
        key = [log_key.public for log_key in pins.log_keys]  # a pinned log vkey holds the public key
    try:
        verdict = _verify(path, manifest, key, checkpoint, fmt or detect_format(path), pins)
    except Rejected as rejected:
        where = f" at seq {rejected.seq}" if rejected.seq is not None else ""
        return Verdict(ok=False, message=f"FAILED{where}: {rejected.reason}", bad_seq=rejected.seq)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return Verdict(ok=False, message=f"FAILED: cannot read {path}: {exc}")
    if key is not None or not verdict.ok:
        return verdict
    if no_signatures:
        return replace(
            verdict,
            signatures_checked=False,
            message=verdict.message.replace(_NOT_CHECKED, f"{_NOT_CHECKED} (--no-signatures)"),
        )
    # Fail closed: consistent rows prove nothing about who wrote them.
    consistent = verdict.message.removeprefix("OK: ").replace(f"; {_NOT_CHECKED}", "")
    return replace(
        verdict,
        ok=False,
        signatures_checked=False,
        message=(
            f"UNVERIFIED: {consistent}; {_NOT_CHECKED} (no key given), so a rewritten export would pass too: "
            "pass --public-key / --public-key-file (manage.py audit_public_key prints it), "
            "or --no-signatures to accept a structural check only"
        ),
    )


def _verify(
    path: Path,
    manifest: Mapping[str, Any] | None,
    key: VerifyingKey | None,
    checkpoint: Mapping[str, Any] | None,
    fmt: str,
    pins: TreePins,
) -> Verdict:
    if manifest is None and fmt == "jsonl":
        manifest = read_trailer(path)
    if manifest is None:
        hint = "the JSONL manifest trailer is missing" if fmt == "jsonl" else "pass the sidecar with --manifest"
        raise Rejected(f"no manifest: {hint}")
    _check_manifest_shape(manifest)
    notes: list[str] = []
    if key is None:
        notes.append(_NOT_CHECKED)
    elif not _public_keys(key) or _signed_by_one_of(manifest, key):
        _check_manifest_signature(manifest, key, notes)
    checkpoint_seq = _checked_checkpoint(checkpoint, key)
    evidence = TreeEvidence(manifest, pins)

    unfiltered = manifest["filters"] == {}
    head = manifest["chain_head"]
    signatures = SignatureCheck.trusting(key) if _public_keys(key) else None
    digests, last_hash, checkpoint_hash = _walk(
        path, fmt, unfiltered=unfiltered, checkpoint_seq=checkpoint_seq, signatures=signatures, evidence=evidence
    )
    if signatures is not None and not notes:
        # Signed by a key not pinned: only a rotation among the rows, signed by a pinned
        # key, can vouch for it (a whole export after a rotation, the old key pinned).
        _check_manifest_signature(manifest, list(signatures.trusted.values()), notes)
    received = digests.as_manifest_fields()
    for name in ("row_count", "first_seq", "last_seq", "seq_digest", "hash_digest"):
        if received[name] != manifest.get(name):
            raise Rejected(
                f"the rows received do not match the manifest: {name} is {received[name]!r}, "
                f"the manifest says {manifest.get(name)!r}"
            )
    if unfiltered and (digests.last_seq or 0, last_hash) != (head.get("seq"), head.get("hash")):
        raise Rejected(
            f"the export ends at seq {digests.last_seq or 0}, not at the chain head seq {head.get('seq')} "
            "the manifest names"
        )
    if digests.last_seq is not None and isinstance(head.get("seq"), int) and digests.last_seq > head["seq"]:
        raise Rejected(f"rows beyond the chain head seq {head['seq']} the manifest names", digests.last_seq)
    if checkpoint is not None:
        notes.append(_compare_checkpoint(checkpoint, checkpoint_hash, head))
    if signatures is not None:
        notes.append(_signature_note(signatures, unfiltered=unfiltered, rows=digests.row_count))
    # Without a key, "signatures NOT checked" stays the last word (what matters most).
    notes.insert(
        len(notes) if key is not None else 0,
        evidence.finish(key if _public_keys(key) else None, signatures_checked=key is not None),
    )
    scope = (
        f"unfiltered chain seq 1-{digests.last_seq or 0} links to the head"
        if unfiltered
        else f"filtered export, filters {json.dumps(manifest['filters'], sort_keys=True)}"
    )
    message = f"OK: {digests.row_count} rows verified ({scope}); " + "; ".join(notes)
    return Verdict(ok=True, message=message, rows=digests.row_count, assurance=evidence.level)


def _check_manifest_signature(manifest: Mapping[str, Any], key: VerifyingKey, notes: list[str]) -> None:
    problem = signature_problem(manifest, key)
    if problem:
        raise Rejected(f"manifest signature invalid: {problem}")
    notes.append(f"manifest signature valid (key {manifest['signature'].get('key_id')})")


def _signed_by_one_of(document: Mapping[str, Any], keys: Sequence[Ed25519PublicKey]) -> bool:
    signature = document.get("signature")
    named = signature.get("key_id") if isinstance(signature, Mapping) else None
    return named in {key_id_of(public) for public in keys}


def _public_keys(key: VerifyingKey | None) -> TypeGuard[Sequence[Ed25519PublicKey]]:
    return key is not None and not isinstance(key, (str, bytes))


def _signature_note(signatures: SignatureCheck, *, unfiltered: bool, rows: int) -> str:
    """What the row signatures showed; raises Rejected for unsealed rows in a whole chain."""
    if signatures.without_columns:
        return "rows carry no signatures (exported before rows were signed): checked through the signed manifest"
    if unfiltered:
        problem = signatures.finish()
        if problem:
            raise Rejected(problem, signatures.unsealed_head[0] if signatures.unsealed_head else None)
    unsigned = rows - signatures.signed
    if unsigned:
        return f"{signatures.signed} row signatures valid, {unsigned} rows from before signing began"
    return f"every row signature valid (keys {', '.join(sorted(signatures.used))})"


def _walk(
    path: Path,
    fmt: str,
    *,
    unfiltered: bool,
    checkpoint_seq: int | None,
    signatures: SignatureCheck | None = None,
    evidence: TreeEvidence | None = None,
) -> tuple[ExportDigests, str, str | None]:
    """One pass over the rows: per-row checks, chain links when unfiltered, digests."""
    digests = ExportDigests()
    expected_seq, expected_prev = 1, GENESIS_HASH
    previous_seq: int | None = None
    checkpoint_hash: str | None = None
    if fmt == "csv":
        csv.field_size_limit(2**31 - 1)
    # No newline translation: every line must end exactly as the exporter wrote it.
    with path.open("r", encoding="utf-8", newline="") as handle:
        rows = csv_rows(handle) if fmt == "csv" else jsonl_rows(handle)
        try:
            for row in rows:
                seq = row["seq"]
                if unfiltered:
                    # The chain first: a missing or moved row is named by the seq that should be here.
                    if seq != expected_seq:
                        bad = seq if isinstance(seq, int) and seq < expected_seq else expected_seq
                        raise Rejected(f"seq gap or reorder: expected seq {expected_seq}, found {seq}", bad)
                    if row["prev_hash"] != expected_prev:
                        raise Rejected(
                            f"prev_hash {row['prev_hash']} does not match the previous row's hash {expected_prev}",
                            seq,
                        )
                problem = _row_problem(row, fmt)
                if problem is None and signatures is not None:
                    problem = _signature_problem(row, signatures)
                if problem:
                    raise Rejected(problem, seq if isinstance(seq, int) else _after(previous_seq))
                if previous_seq is not None and seq <= previous_seq:
                    raise Rejected(f"seq {seq} follows seq {previous_seq}: rows out of order", seq)
                digests.add(seq, row["hash"])
                if evidence is not None:
                    evidence.add(seq, row["hash"])
                if seq == checkpoint_seq:
                    checkpoint_hash = row["hash"]
                previous_seq, expected_seq, expected_prev = seq, seq + 1, row["hash"]
        except Rejected as rejected:
            if rejected.seq is None:
                rejected.seq = expected_seq if unfiltered else None
                if not unfiltered and previous_seq is not None:
                    rejected.reason += f" (after seq {previous_seq})"
            raise
    return digests, expected_prev, checkpoint_hash


def _after(previous_seq: int | None) -> int | None:
    return None if previous_seq is None else previous_seq + 1


def _signature_problem(row: Mapping[str, Any], signatures: SignatureCheck) -> str | None:
    if "signature" not in row:
        # An export from before rows carried signatures: its signed manifest still covers
        # every row's hash, but there is nothing to check row by row.
        signatures.without_columns += 1
        return None
    if signatures.without_columns:
        return "this row carries a signature column and earlier rows did not: the file mixes two layouts"
    document = json.loads(row["canonical"])
    return signatures({**row, "verb": document.get("verb")})


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint file written by the server (see audit.checkpoint)."""
    with open(path, encoding="utf-8") as handle:
        checkpoint: dict[str, Any] = json.load(handle)
    return checkpoint


def _checked_checkpoint(checkpoint: Mapping[str, Any] | None, key: VerifyingKey | None) -> int | None:
    if checkpoint is None:
        return None
    if checkpoint.get("type") != CHECKPOINT_TYPE:
        raise Rejected(f"the checkpoint's type is {checkpoint.get('type')!r}, not {CHECKPOINT_TYPE!r}")
    seq = checkpoint.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(checkpoint.get("hash"), str):
        raise Rejected("the checkpoint's seq or hash is missing or malformed")
    if key is None:
        raise Rejected("a checkpoint is only evidence with its signature: pass --public-key")
    problem = signature_problem(checkpoint, key)
    if problem:
        raise Rejected(f"checkpoint signature invalid: {problem}")
    return seq


def _compare_checkpoint(checkpoint: Mapping[str, Any], row_hash: str | None, head: Mapping[str, Any]) -> str:
    seq, expected = checkpoint["seq"], checkpoint["hash"]
    if row_hash is None and head.get("seq") == seq:
        row_hash = head.get("hash")
    if row_hash is None:
        if isinstance(head.get("seq"), int) and seq > head["seq"]:
            raise Rejected(f"checkpoint seq {seq} is newer than this export's chain head seq {head['seq']}")
        raise Rejected(f"checkpoint seq {seq} is not in this export; verify an unfiltered export against it")
    if row_hash != expected:
        raise Rejected(
            f"the export's hash at seq {seq} is {row_hash}, the signed checkpoint of {checkpoint.get('time')} "
            f"says {expected}: the chain was rewritten",
            seq,
        )
    return f"checkpoint seq {seq} of {checkpoint.get('time')} matches"
