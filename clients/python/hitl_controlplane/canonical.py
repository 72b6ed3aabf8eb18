"""The pinned canonical form of audit events, and chain verification over plain rows.

Pure Python on purpose: the offline verifier imports this module without Django,
so nothing here may import Django or project code.

Canonical form: JSON with sorted keys, separators (",", ":"), non-ASCII kept as
UTF-8, no floats (decimals must already be strings), timestamps already formatted
by `format_timestamp`. Each row's hash is sha256(prev_hash_ascii || canonical).

Agents' params carry floats, which the chain's form refuses; `value_bytes` is the
canonical form of any JSON value (RFC 8785, JCS: keys sorted by UTF-16 code units,
numbers as ECMAScript prints them, integers exactly), so a non-Python verifier can
recompute a params digest. `value_sha256` is its SHA-256: the digest the server signs
for the params an agent submitted and the params it approved, and the one the client
recomputes for the call it made (hitl_controlplane.decisions).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

__all__ = [
    "GENESIS_HASH",
    "VerifyResult",
    "canonical_bytes",
    "chain_hash",
    "event_document",
    "format_timestamp",
    "value_bytes",
    "value_sha256",
    "verify_rows",
]

GENESIS_HASH = "0" * 64

# The columns of one stored event, in the order exports and verification read them.
EVENT_COLUMNS = (
    "seq",
    "occurred_at",
    "actor_kind",
    "actor_id",
    "actor_label",
    "verb",
    "request_id",
    "agent_id",
    "metadata",
    "prev_hash",
    "hash",
    "canonical",
)


def _refuse_non_canonical(value: Any, path: str) -> None:
    """Walk a value and raise TypeError on anything the canonical form cannot pin."""
    if isinstance(value, float):
        raise TypeError(f"floats are not canonical (at {path}); pass decimals as strings")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                # json.dumps would silently turn 1 into "1", so two documents could collide.
                raise TypeError(f"object keys must be strings (at {path}: {key!r})")
            _refuse_non_canonical(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _refuse_non_canonical(item, f"{path}[{index}]")
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise TypeError(f"{type(value).__name__} is not canonical (at {path}); convert it to a string first")


def canonical_bytes(obj: Any) -> bytes:
    """Return the canonical UTF-8 JSON bytes of `obj`.

    Accepts dicts with string keys, lists, tuples, str, int, bool and None. Raises
    TypeError for floats, datetimes, decimals, UUIDs and anything else: convert
    those to strings first so the bytes never depend on a float repr or a locale.
    Raises UnicodeEncodeError for strings holding lone surrogates.
    """
    _refuse_non_canonical(obj, "$")
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _number(value: int | float) -> str:
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers here")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError("NaN and infinities are not JSON")
    if value == 0:
        return "0"
    # repr is the shortest round-trip form; ECMAScript's Number::toString lays those digits out.
    sign, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    if not isinstance(exponent, int):  # 'n', 'N', 'F': a NaN or an infinity, refused above
        raise ValueError("NaN and infinities are not JSON")
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), exponent + len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        mantissa = digits[0] + (f".{digits[1:]}" if k > 1 else "")
        text = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return ("-" if value < 0 else "") + text


def _write(value: Any, out: list[str]) -> None:
    if value is None or isinstance(value, bool):
        out.append(json.dumps(value))
    elif isinstance(value, (int, float)):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("object keys must be strings")
        out.append("{")
        for index, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))):
            out.append("," if index else "")
            out.append(json.dumps(key, ensure_ascii=False) + ":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            out.append("," if index else "")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def value_bytes(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of a JSON value (floats allowed). Raises TypeError/ValueError for non-JSON."""
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")


def value_sha256(value: Any) -> str | None:
    """SHA-256 hex of `value_bytes(value)`; None for None (nothing to act on)."""
    return None if value is None else hashlib.sha256(value_bytes(value)).hexdigest()


def format_timestamp(dt: datetime) -> str:
    """Format an aware datetime as UTC ISO-8601 with microseconds, e.g. "2026-11-29T18:00:00.000000Z".

    Raises ValueError for naive datetimes: their instant is ambiguous.
    """
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("audit timestamps must be timezone-aware")
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def chain_hash(prev_hash: str, canonical: bytes) -> str:
    """Return sha256(prev_hash as ASCII || canonical bytes) as 64 hex digits."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical).hexdigest()


def event_document(
    *,
    seq: int,
    occurred_at: str,
    actor_kind: str,
    actor_id: str,
    actor_label: str,
    verb: str,
    request_id: str | None,
    agent_id: int | None,
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """Return the document whose canonical bytes are hashed for one event.

    `occurred_at` must already be formatted by `format_timestamp` and `request_id`
    be the UUID's string form (or None).
    """
    return {
        "seq": seq,
        "occurred_at": occurred_at,
        "actor": {"kind": actor_kind, "id": actor_id, "label": actor_label},
        "verb": verb,
        "request_id": request_id,
        "agent_id": agent_id,
        "metadata": dict(metadata),
    }


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of walking a chain segment.

    `checked` counts rows that passed. `head_seq`/`head_hash` are the last good row
    (or the anchor when nothing passed). When `ok` is False, `bad_seq` is the first
    seq that failed and `reason` says why.
    """

    ok: bool
    checked: int
    head_seq: int
    head_hash: str
    bad_seq: int | None = None
    reason: str | None = None


RowCheck = Callable[[Mapping[str, Any]], "str | None"]


def _as_bytes(canonical: str | bytes | memoryview) -> bytes:
    if isinstance(canonical, str):
        return canonical.encode("utf-8")
    return bytes(canonical)


def _embedded_seq(canonical: bytes) -> object:
    try:
        document = json.loads(canonical.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return document.get("seq") if isinstance(document, dict) else None


def _row_problem(row: Mapping[str, Any], expected_seq: int, expected_prev: str) -> str | None:
    """Return why `row` does not continue the chain, or None when it does."""
    seq = row["seq"]
    if seq != expected_seq:
        return f"seq gap: expected seq {expected_seq}, found {seq}"
    if row["prev_hash"] != expected_prev:
        return f"prev_hash {row['prev_hash']} does not match the previous row's hash {expected_prev}"
    canonical = _as_bytes(row["canonical"])
    recomputed = chain_hash(row["prev_hash"], canonical)
    if recomputed != row["hash"]:
        return f"stored hash {row['hash']} does not match recomputed hash {recomputed}"
    embedded = _embedded_seq(canonical)
    if embedded != seq:
        return f"canonical document names seq {embedded!r}, row is seq {seq}"
    return None


def verify_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    start_seq: int = 1,
    anchor_hash: str = GENESIS_HASH,
    row_check: RowCheck | None = None,
) -> VerifyResult:
    """Verify rows (dicts with seq, prev_hash, hash, canonical) given in seq order.

    Checks that seqs are contiguous from `start_seq`, that each prev_hash equals the
    previous row's hash (the first one equals `anchor_hash`: the genesis hash for
    seq 1, else the trusted hash of seq start_seq-1), that each hash recomputes from
    prev_hash and canonical, and that the canonical document names the row's seq.
    `row_check`, if given, may return a reason to fail a row (the database verifier
    uses it to compare columns with the canonical text). Stops at the first bad row.
    """
    expected_seq, expected_prev, checked = start_seq, anchor_hash, 0
    for row in rows:
        problem = _row_problem(row, expected_seq, expected_prev)
        if problem is None and row_check is not None:
            problem = row_check(row)
        if problem is not None:
            return VerifyResult(
                ok=False,
                checked=checked,
                head_seq=expected_seq - 1,
                head_hash=expected_prev,
                bad_seq=row["seq"] if row["seq"] < expected_seq else expected_seq,
                reason=problem,
            )
        expected_seq, expected_prev, checked = expected_seq + 1, row["hash"], checked + 1
    return VerifyResult(ok=True, checked=checked, head_seq=expected_seq - 1, head_hash=expected_prev)
