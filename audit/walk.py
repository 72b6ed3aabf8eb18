"""Walking the stored chain: linkage, hashes, columns against the canonical text,
and every row's signature under a trusted key (audit.signing), in constant memory."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hitl_controlplane.canonical import (
    EVENT_COLUMNS,
    GENESIS_HASH,
    VerifyResult,
    canonical_bytes,
    event_document,
    format_timestamp,
    verify_rows,
)

from . import signing
from .models import AuditEvent

__all__ = ["VERIFY_CHUNK_SIZE", "verify_chain"]

VERIFY_CHUNK_SIZE = 2000

_VERIFY_FIELDS = (*EVENT_COLUMNS, "key_id", "signature")


def _columns_match_canonical(row: Mapping[str, Any]) -> str | None:
    """Fail a row whose columns say something other than the canonical text that was hashed."""
    if not isinstance(row["metadata"], Mapping):
        return "metadata column is not a JSON object"
    try:
        expected = canonical_bytes(
            event_document(
                seq=row["seq"],
                occurred_at=format_timestamp(row["occurred_at"]),
                actor_kind=row["actor_kind"],
                actor_id=row["actor_id"],
                actor_label=row["actor_label"],
                verb=row["verb"],
                request_id=None if row["request_id"] is None else str(row["request_id"]),
                agent_id=row["agent_id"],
                metadata=row["metadata"],
            )
        )
    except (TypeError, ValueError) as exc:
        return f"columns cannot be canonicalized: {exc}"
    if expected.decode("utf-8") != row["canonical"]:
        return "columns differ from the canonical text that was hashed"
    return None


def verify_chain(
    since_seq: int = 1,
    progress: Callable[[int, int], None] | None = None,
    trusted_keys: Iterable[Ed25519PublicKey] | None = None,
) -> VerifyResult:
    """Walk the chain from `since_seq` to the head in seq order, in constant memory.

    From seq 1 the chain is anchored at the genesis hash; from a later seq, at the
    stored hash of seq since_seq-1 (trusted, not re-verified). Besides linkage and
    hashes, each row's columns must match its canonical text and its signature must
    hold under a trusted key (`trusted_keys`, by default the pinned ones and the
    server's own: audit.signing). `progress(done, total)` is called after each
    chunk and at the end.
    """
    since_seq = max(since_seq, 1)
    anchor_hash = GENESIS_HASH
    if since_seq > 1:
        anchor = AuditEvent.objects.filter(seq=since_seq - 1).values_list("hash", flat=True).first()
        if anchor is None:
            return VerifyResult(
                ok=False,
                checked=0,
                head_seq=since_seq - 1,
                head_hash="",
                bad_seq=since_seq - 1,
                reason=f"seq {since_seq - 1} (the anchor for --since-seq {since_seq}) does not exist",
            )
        anchor_hash = anchor
    total = AuditEvent.objects.filter(seq__gte=since_seq).count()
    rows = (
        AuditEvent.objects.filter(seq__gte=since_seq)
        .order_by("seq")
        .values(*_VERIFY_FIELDS)
        .iterator(chunk_size=VERIFY_CHUNK_SIZE)
    )
    signatures = _signature_check(since_seq, trusted_keys)
    if isinstance(signatures, VerifyResult):
        return signatures

    def row_check(row: Mapping[str, Any]) -> str | None:
        return _columns_match_canonical(row) or signatures(row)

    result = verify_rows(
        _reporting(rows, total, progress), start_seq=since_seq, anchor_hash=anchor_hash, row_check=row_check
    )
    if progress is not None:
        progress(result.checked, total)
    unsealed = signatures.finish() if result.ok else None
    if unsealed is not None:
        seq = signatures.unsealed_head[0] if signatures.unsealed_head else None
        return VerifyResult(
            ok=False,
            checked=result.checked,
            head_seq=result.head_seq,
            head_hash=result.head_hash,
            bad_seq=seq,
            reason=unsealed,
        )
    return result


def _signature_check(
    since_seq: int, trusted_keys: Iterable[Ed25519PublicKey] | None
) -> signing.SignatureCheck | VerifyResult:
    """The signature state at `since_seq`: keys introduced by earlier rotations, earlier seals."""
    check = signing.SignatureCheck.trusting(signing.trusted_public_keys() if trusted_keys is None else trusted_keys)
    if since_seq <= 1:
        return check
    earlier = AuditEvent.objects.filter(seq__lt=since_seq).order_by("seq")
    last_unsigned = earlier.filter(signature="").reverse().values(*_VERIFY_FIELDS).first()
    replayed = [last_unsigned] if last_unsigned else []
    replayed += list(earlier.filter(verb__in=(signing.KEY_ROTATED, signing.SEALED)).values(*_VERIFY_FIELDS))
    for row in replayed:
        problem = check(row)
        if problem is not None:
            return VerifyResult(
                ok=False, checked=0, head_seq=since_seq - 1, head_hash="", bad_seq=row["seq"], reason=problem
            )
    check.signing_began = earlier.exclude(signature="").exists()
    return check


def _reporting(
    rows: Iterator[dict[str, Any]], total: int, progress: Callable[[int, int], None] | None
) -> Iterator[dict[str, Any]]:
    for done, row in enumerate(rows):
        if progress is not None and done and done % VERIFY_CHUNK_SIZE == 0:
            progress(done, total)
        yield row


def verify_unsigned_prefix() -> VerifyResult:
    """Verify the rows written before signing began (linkage, hashes, columns), for `audit_seal`.

    Fails when a signed row comes before the last unsigned one: that unsigned row was
    inserted after signing began, without the key, and no seal may bless it.
    """
    last_unsigned = AuditEvent.objects.filter(signature="").order_by("-seq").values_list("seq", flat=True).first()
    if last_unsigned is None:
        return VerifyResult(ok=True, checked=0, head_seq=0, head_hash=GENESIS_HASH)
    signed_before = (
        AuditEvent.objects.filter(seq__lt=last_unsigned)
        .exclude(signature="")
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )
    if signed_before is not None:
        return VerifyResult(
            ok=False,
            checked=0,
            head_seq=0,
            head_hash="",
            bad_seq=last_unsigned,
            reason=f"seq {last_unsigned} is unsigned but signing began at seq {signed_before}: "
            "it was inserted without the signing key",
        )
    rows = (
        AuditEvent.objects.filter(seq__lte=last_unsigned)
        .order_by("seq")
        .values(*_VERIFY_FIELDS)
        .iterator(chunk_size=VERIFY_CHUNK_SIZE)
    )
    return verify_rows(rows, start_seq=1, anchor_hash=GENESIS_HASH, row_check=_columns_match_canonical)
