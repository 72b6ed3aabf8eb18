"""Recording audit events and walking the chain.

Callers do the business change and its audit events in one transaction:

    with audited_atomic():
        request.state = "approved"
        request.save()
        record("request.approved", actor=Actor.for_user(user), request=request,
               metadata={"from": "pending_approval", "to": "approved"})

`record()` only buffers. As the last step of the outermost `audited_atomic()` the
buffered events are appended in one go under a short lock (a PostgreSQL advisory
transaction lock; SQLite's IMMEDIATE transactions already serialize writers), so
the chain never forks and the lock is held from the append to the commit only. If
the block raises, its events vanish with the transaction: no event, no seq gap.
Open `audited_atomic()` as the outermost transaction: inside a plain outer
`atomic()` the lock is held until that outer transaction commits. On PostgreSQL
use READ COMMITTED (the default): under REPEATABLE READ the head read after the
lock could be stale, and the append would fail with IntegrityError (seq is the
primary key, so the chain still cannot fork).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from hitl_controlplane.canonical import (
    GENESIS_HASH,
    VerifyResult,
    canonical_bytes,
    chain_hash,
    event_document,
    format_timestamp,
)

from . import signing, tree
from .models import ActorKind, AuditEvent
from .vocabulary import is_registered

__all__ = [
    "Actor",
    "VerifyResult",
    "audited_atomic",
    "digest",
    "head",
    "record",
    "verify_chain",
]

# A fixed signed 64-bit key; it only has to differ from other advisory locks in the project.
AUDIT_APPEND_LOCK_KEY = int.from_bytes(b"cp-audit", "big")


# --- Actors -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Actor:
    """Who did it. The label is copied onto the row so it survives the actor's deletion."""

    kind: str
    id: str
    label: str

    def __post_init__(self) -> None:
        if self.kind not in ActorKind.values:
            raise ValueError(f"actor kind must be one of {ActorKind.values}, not {self.kind!r}")
        if not self.label:
            raise ValueError("an audit actor needs a label")

    @classmethod
    def for_user(cls, user: Any) -> Actor:
        return cls(kind=ActorKind.USER, id=str(user.pk), label=user.get_username() or str(user))

    @classmethod
    def for_agent(cls, agent: Any) -> Actor:
        return cls(kind=ActorKind.AGENT, id=str(agent.pk), label=str(agent.name))

    @classmethod
    def system(cls, label: str = "system") -> Actor:
        return cls(kind=ActorKind.SYSTEM, id="", label=label)


# --- Buffering --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PendingEvent:
    occurred_at: datetime
    actor: Actor
    verb: str
    request_id: uuid.UUID | None
    agent_id: int | None
    metadata: dict[str, Any]


@dataclass
class _Buffer:
    events: list[_PendingEvent] = field(default_factory=list)


# Holds the outermost open buffer of this thread or task; nested blocks share it.
_current_buffer: ContextVar[_Buffer | None] = ContextVar("audit_buffer", default=None)


@contextmanager
def audited_atomic() -> Iterator[None]:
    """A `transaction.atomic()` whose recorded events are appended at its end.

    Nested uses join the outermost buffer and append nothing themselves; a nested
    block that raises discards the events it recorded (its savepoint rolls back).
    Events recorded inside a plain nested `atomic()` that rolls back are NOT
    discarded: wrap such blocks in `audited_atomic()` instead.
    """
    outer = _current_buffer.get()
    if outer is not None:
        mark = len(outer.events)
        try:
            with transaction.atomic():
                yield
        except BaseException:
            del outer.events[mark:]
            raise
        return

    buffer = _Buffer()
    token = _current_buffer.set(buffer)
    try:
        with transaction.atomic():
            yield
            # A block marked for rollback (set_rollback, or a caught database error)
            # is about to be undone silently; its events go with it.
            if not connection.needs_rollback:
                _append(buffer.events)
    finally:
        _current_buffer.reset(token)


def record(
    verb: str,
    *,
    actor: Actor,
    request: Any = None,
    agent: Any = None,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Buffer one event into the current `audited_atomic()` (or append it in its own).

    `request` is anything with a UUID `.pk` (or None); `agent` anything with an
    integer `.pk`, defaulting to `request.agent_id`. Raises ValueError for an
    unregistered verb and TypeError for metadata that is not canonical (floats,
    datetimes, decimals: pass strings), so the caller's bug surfaces here.
    Put digests (`digest()`) of bodies into metadata, not the bodies.
    """
    if not is_registered(verb):
        raise ValueError(f"{verb!r} is not a registered audit verb")
    event = _PendingEvent(
        occurred_at=timezone.now(),
        actor=actor,
        verb=verb,
        request_id=_request_id(request),
        agent_id=_agent_id(agent, request),
        metadata=_checked_metadata(metadata),
    )
    buffer = _current_buffer.get()
    if buffer is not None:
        buffer.events.append(event)
        return
    with audited_atomic():
        _current_buffer.get().events.append(event)  # type: ignore[union-attr]


def _request_id(request: Any) -> uuid.UUID | None:
    if request is None:
        return None
    pk = request.pk
    return pk if isinstance(pk, uuid.UUID) else uuid.UUID(str(pk))


def _agent_id(agent: Any, request: Any) -> int | None:
    if agent is not None:
        return int(agent.pk)
    agent_id = getattr(request, "agent_id", None)
    return None if agent_id is None else int(agent_id)


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"audit metadata must be a mapping, not {type(metadata).__name__}")
    encoded = canonical_bytes(dict(metadata))
    if b"\\u0000" in encoded:
        # PostgreSQL jsonb cannot store NUL; refuse on every database alike.
        raise ValueError("audit metadata strings must not contain NUL characters")
    # A round trip copies the value (later mutation by the caller cannot change the
    # row) and turns tuples into lists exactly as the stored JSON will read back.
    copied: dict[str, Any] = json.loads(encoded)
    return copied


# --- Appending ----------------------------------------------------------------------------------


def _append(pending: list[_PendingEvent]) -> None:
    """Chain and insert `pending`; must run inside the outermost audited transaction."""
    if not pending:
        return
    # Without the lock (another backend), seq being the primary key and hash being
    # unique still make a racing append fail instead of forking the chain.
    seq, prev_hash, head_key_id, tree_stored, edge = _head_and_tree_size()
    keys = signing.signer()
    signed: list[tuple[_PendingEvent, signing.SigningKey]] = [(event, keys.current) for event in pending]
    handing_over = keys.rotation_from(head_key_id)
    if handing_over is not None:  # the previous key names the current one before it signs anything
        rotation = _PendingEvent(
            timezone.now(), Actor.system("audit-signing"), signing.KEY_ROTATED, None, None, keys.rotation_metadata()
        )
        signed.insert(0, (rotation, handing_over))
    rows = []
    head_seq, head_hash = seq, prev_hash
    for event, key in signed:
        seq += 1
        row = _chained_row(seq, prev_hash, event, key)
        rows.append(row)
        prev_hash = row.hash
    AuditEvent.objects.all()._append_chained(rows)
    # In the same transaction and under the same lock: no committed event is outside the tree.
    tree.extend(head_seq, head_hash, tree_stored, [row.hash for row in rows], edge)


def _head_and_tree_size() -> tuple[int, str, str, int, list[tuple[int, str]] | None]:
    """Take the append lock (PostgreSQL), read the head and the Merkle tree's size, in one round trip.

    The statements go in one message, without parameters (so any psycopg cursor
    accepts them). PostgreSQL runs them in order and, under READ COMMITTED, the
    read takes its snapshot when it starts, after the lock is held: it sees every
    append committed before ours, as a separate query would. SQLite's IMMEDIATE
    transactions already serialize writers. The head row comes even when the log is
    empty. When another process appended last (`tree.edge_wanted`), the tree's right
    edge comes in the same statement.
    """
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    read = (
        f'SELECT 0, head."seq", head."hash", head."key_id", {tree.size_sql()} FROM (SELECT 1 AS one) one '
        f'LEFT JOIN (SELECT "seq", "hash", "key_id" FROM {table} ORDER BY "seq" DESC LIMIT 1) head ON 1 = 1'
    )
    with_edge = tree.edge_wanted()
    if with_edge:
        read = f"{tree.EDGE_BITS}{read} UNION ALL {tree.edge_sql()}"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"SELECT pg_advisory_xact_lock({int(AUDIT_APPEND_LOCK_KEY)}); {read}")
            cursor.nextset()
        else:
            cursor.execute(read)
        found = cursor.fetchall()
    _, seq, row_hash, key_id, stored = next(row for row in found if row[0] == 0)
    edge = [(row[1], row[2]) for row in found if row[0] == 1] if with_edge else None
    if seq is None:
        return 0, GENESIS_HASH, "", int(stored or 0), edge
    return seq, row_hash, key_id, int(stored or 0), edge


def _chained_row(seq: int, prev_hash: str, event: _PendingEvent, key: signing.SigningKey) -> AuditEvent:
    document = event_document(
        seq=seq,
        occurred_at=format_timestamp(event.occurred_at),
        actor_kind=str(event.actor.kind),
        actor_id=event.actor.id,
        actor_label=event.actor.label,
        verb=event.verb,
        request_id=None if event.request_id is None else str(event.request_id),
        agent_id=event.agent_id,
        metadata=event.metadata,
    )
    canonical = canonical_bytes(document)
    row_hash = chain_hash(prev_hash, canonical)
    return AuditEvent(
        seq=seq,
        occurred_at=event.occurred_at,
        actor_kind=event.actor.kind,
        actor_id=event.actor.id,
        actor_label=event.actor.label,
        verb=event.verb,
        request_id=event.request_id,
        agent_id=event.agent_id,
        metadata=event.metadata,
        prev_hash=prev_hash,
        hash=row_hash,
        canonical=canonical.decode("utf-8"),
        key_id=key.key_id,
        signature=key.sign(row_hash),
    )


# --- Reading and verifying ----------------------------------------------------------------------


def digest(value: Any) -> dict[str, Any]:
    """Fingerprint a value for metadata: {"hmac": keyed SHA-256 hex, "size": canonical bytes}.

    Keyed with settings.AUDIT_HMAC_KEY so a short value cannot be recovered by
    hashing guesses. Any JSON-like value works (agents' params carry floats), so
    this uses its own stable encoding rather than the chain's float-free one.
    """
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()
    key = settings.AUDIT_HMAC_KEY
    key_bytes = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return {"hmac": hmac.new(key_bytes, encoded, hashlib.sha256).hexdigest(), "size": len(encoded)}


def head() -> tuple[int, str]:
    """The last (seq, hash) of the chain; (0, GENESIS_HASH) when it is empty."""
    last = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()
    return last if last is not None else (0, GENESIS_HASH)


# Walking and verifying the stored chain lives in audit.walk; re-exported for callers of `chain`.
from .walk import verify_chain  # noqa: E402  (walk imports nothing from here)
