"""The audit events' RFC 6962 Merkle tree, kept with the append, and its proofs.

Leaf i is event seq i + 1, hashed over the event's signed bytes (the ASCII of its
chain hash: hitl_controlplane.merkle). The tree is maintained in the same
transaction as the append, under the same lock (audit.chain._append calls
`extend`), so every committed event is in the tree the moment it is visible.

Storage (`AuditTreeNode`): appending leaf `seq` completes the perfect subtrees of
levels 0..tz(seq) (tz: trailing zero bits) that end at it; their hashes are stored in
that seq's row, about two hashes per event. Subtree (level, index) is therefore
hash number `level` of row (index + 1) << level. A root at any size and any proof are
right folds of O(log n) such subtrees (merkle.perfect_cover), read in one query.

The append needs the right edge of the tree (the subtrees `perfect_cover(0, n)`
names). The tree's size is read in the same statement as the chain's head
(`size_sql`); a process remembers the edge it last wrote, keyed by the head's seq and
chain hash (which commits to every earlier event), so its next append reads nothing
more; after another process's append it reads the edge, one query of at most
log2(n) rows. Keeping the tree then costs the append one INSERT. When the tree is not
at the head (events that predate it, a bulk fill, a tail removed under maintenance)
the append first brings it there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from hitl_controlplane import merkle
from hitl_controlplane.range_proof import range_proof_ranges

from .models import AuditEvent, AuditTreeNode

__all__ = [
    "TreeGap",
    "catch_up",
    "consistency_proof",
    "extend",
    "inclusion_proof",
    "range_proof",
    "edge_sql",
    "edge_wanted",
    "size_sql",
    "root",
    "size",
    "subtree_rows",
]

HASH_HEX = 64
INSERT_BATCH = 400  # rows per INSERT: under SQLite's 999 bound parameters


@dataclass(frozen=True)
class _Edge:
    """The compact range this process last wrote, and the head it belongs to."""

    size: int
    head_hash: str
    subtrees: tuple[tuple[int, bytes], ...]  # (level, hash), largest first


# The chain hash at the head commits to every earlier event, so a head with the same seq
# and hash (and a tree of that size) has this same right edge; anything else reads it.
_last_edge: _Edge | None = None
# Set when the last append found another process's head: then the next one reads the
# edge in its head statement rather than in a second round trip.
_edge_missed = True


class TreeGap(LookupError):
    """The tree lacks a subtree a request needs (the size is beyond its head, or rows are missing)."""


def _row_seq(level: int, index: int) -> int:
    return (index + 1) << level


def _read(keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """The hashes of subtrees (level, index), in one query; raises TreeGap when one is missing."""
    wanted = set(keys)
    by_seq = {_row_seq(level, index) for level, index in wanted}
    stored = dict(AuditTreeNode.objects.filter(seq__in=by_seq).values_list("seq", "hashes"))
    found: dict[tuple[int, int], bytes] = {}
    for level, index in wanted:
        text = stored.get(_row_seq(level, index), "")
        piece = text[level * HASH_HEX : (level + 1) * HASH_HEX]
        if len(piece) != HASH_HEX:
            raise TreeGap(f"the tree has no subtree of level {level} at index {index}")
        found[(level, index)] = bytes.fromhex(piece)
    return found


def _ranges(ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    covers = [merkle.perfect_cover(a, b) for a, b in ranges]
    subtrees = _read(key for cover in covers for key in cover)
    return [merkle.fold_cover(cover, subtrees) for cover in covers]


def size() -> int:
    """How many leaves the tree holds (the seq of its newest row)."""
    newest = AuditTreeNode.objects.order_by("-seq").values_list("seq", flat=True).first()
    return int(newest or 0)


def root(tree_size: int) -> bytes:
    """MTH of the first `tree_size` events."""
    if tree_size == 0:
        return merkle.EMPTY_ROOT
    return _ranges([(0, tree_size)])[0]


def leaf_hash(seq: int) -> bytes:
    """The stored leaf hash of event `seq` (level 0 of its row)."""
    return _ranges([(seq - 1, seq)])[0]


def event_proof(seq: int, event_hash: str) -> dict[str, Any] | None:
    """What the auditor's event page shows: the event's inclusion in the whole tree, checked here.

    None when the tree does not hold the event (yet). `leaf_matches` says whether the
    stored leaf is the hash of the event's signed bytes as the row holds them now.
    """
    tree_size = size()
    if seq > tree_size:
        return None
    leaf, top, proof = leaf_hash(seq), root(tree_size), inclusion_proof(seq, tree_size)
    return {
        "tree_size": tree_size,
        "root_hash": top.hex(),
        "leaf_hash": leaf.hex(),
        "proof": [node.hex() for node in proof],
        "leaf_matches": leaf == merkle.event_leaf_hash(event_hash),
        "verifies": merkle.verify_inclusion(seq - 1, tree_size, leaf, proof, top),
    }


def inclusion_proof(seq: int, tree_size: int) -> list[bytes]:
    """The audit path of event `seq` in the tree of `tree_size` events (1 <= seq <= tree_size)."""
    return _ranges(merkle.inclusion_ranges(seq - 1, tree_size))


def consistency_proof(first: int, tree_size: int) -> list[bytes]:
    """The proof that the tree of `first` events is a prefix of the tree of `tree_size` events."""
    return _ranges(merkle.consistency_ranges(first, tree_size))


def range_proof(start: int, end: int, tree_size: int) -> tuple[list[bytes], list[bytes]]:
    """(left, consistency) of the range proof of leaves [start, end) in the tree of `tree_size` (one query).

    The layout is `hitl_controlplane.range_proof`'s: an export's batched proof.
    """
    left, consistency = range_proof_ranges(start, end, tree_size)
    hashes = _ranges([*left, *consistency])
    return hashes[: len(left)], hashes[len(left) :]


def size_sql() -> str:
    """A scalar subquery for the tree's size, to read in the same statement as the chain's head."""
    return f'(SELECT max("seq") FROM {AuditTreeNode._meta.db_table})'


def edge_sql() -> str:
    """Rows `1, seq, hashes, NULL, NULL`: the tree's right edge, to read with the head when it will be needed.

    The edge rows' seqs are the prefix sums of the tree size's binary digits (the size
    with its lowest k bits cleared, for each set bit k): the rows holding the subtrees
    `perfect_cover(0, size)` names. Plain SQL that PostgreSQL and SQLite both run; put
    `EDGE_BITS` first in the statement (a recursive CTE for the bit positions).
    """
    table = AuditTreeNode._meta.db_table
    return (
        f'SELECT 1, "seq", "hashes", NULL, NULL FROM {table} WHERE "seq" IN ('
        f'SELECT (top.n >> b) << b FROM edge_bits, (SELECT max("seq") AS n FROM {table}) top '
        "WHERE ((top.n >> b) & 1) = 1)"
    )


EDGE_BITS = "WITH RECURSIVE edge_bits(b) AS (SELECT 0 UNION ALL SELECT b + 1 FROM edge_bits WHERE b < 62) "


def edge_wanted() -> bool:
    """Whether the next append should read the edge with the head: the last one could not use its own."""
    return _edge_missed


def _stack(tree_size: int, rows: dict[int, str]) -> list[tuple[int, bytes]]:
    stack = []
    for level, index in merkle.perfect_cover(0, tree_size) if tree_size else []:
        piece = rows.get(_row_seq(level, index), "")[level * HASH_HEX : (level + 1) * HASH_HEX]
        if len(piece) != HASH_HEX:
            raise TreeGap(f"the tree has no subtree of level {level} at index {index}")
        stack.append((level, bytes.fromhex(piece)))
    return stack


def extend(
    head_seq: int,
    head_hash: str,
    stored: int,
    event_hashes: Sequence[str],
    edge: Sequence[tuple[int, str]] | None = None,
) -> None:
    """Add the events after seq `head_seq` (chain hash `head_hash`) to the tree, which holds `stored` leaves.

    Runs inside the append's transaction, under its lock, with the new events' chain
    hashes in seq order; `stored` was read with the head (`size_sql`), and `edge` too
    when `edge_wanted()` said so (`edge_sql`).
    """
    global _last_edge, _edge_missed
    if not event_hashes:
        return
    if stored > head_seq:
        # Only a maintenance deletion of the chain's tail gets here. The tree is derived
        # data, not evidence: it follows the chain, and checkpoints are what expose a rollback.
        AuditTreeNode.objects.filter(seq__gt=head_seq).delete()
        stored = head_seq
    last = _last_edge
    hit = last is not None and stored == last.size == head_seq and last.head_hash == head_hash
    _edge_missed = not hit
    if last is not None and hit:
        stack = list(last.subtrees)
    else:
        if edge is not None and max((seq for seq, _ in edge), default=0) == stored:
            rows = dict(edge)  # read with the head (`edge_sql`): no second round trip
        else:
            cover = merkle.perfect_cover(0, stored) if stored else []
            wanted = [_row_seq(*key) for key in cover]
            rows = dict(AuditTreeNode.objects.filter(seq__in=wanted).values_list("seq", "hashes"))
        stack = _catch_up(_stack(stored, rows), stored, head_seq)
    _last_edge = None  # until this append's rows are in: a failed insert must not leave a wrong edge
    stack = _extend_from(stack, head_seq, event_hashes)
    _last_edge = _Edge(head_seq + len(event_hashes), event_hashes[-1], tuple(stack))


def catch_up() -> int:
    """Bring the tree to the chain's head in one transaction; returns the leaves added.

    For bulk fills that bypass the append (tests/perf); run it with nothing else
    appending. The next append would do the same, inside its own transaction.
    """
    with transaction.atomic():
        head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        stored = size()
        if stored >= head:
            return 0
        cover = merkle.perfect_cover(0, stored) if stored else []
        rows = dict(
            AuditTreeNode.objects.filter(seq__in=[_row_seq(*key) for key in cover]).values_list("seq", "hashes")
        )
        _catch_up(_stack(stored, rows), stored, head)
        return head - stored


def _catch_up(
    stack: list[tuple[int, bytes]], stored: int, tree_size: int, batch: int = 5000
) -> list[tuple[int, bytes]]:
    """Add the stored events seq stored+1..tree_size (appended past the tree) to it."""
    while stored < tree_size:
        hashes = list(
            AuditEvent.objects.filter(seq__gt=stored, seq__lte=min(stored + batch, tree_size))
            .order_by("seq")
            .values_list("hash", flat=True)
        )
        if len(hashes) != min(batch, tree_size - stored):
            raise TreeGap(f"audit events after seq {stored} are not contiguous")
        stack = _extend_from(stack, stored, hashes)
        stored += len(hashes)
    return stack


def _extend_from(
    stack: list[tuple[int, bytes]], tree_size: int, event_hashes: Sequence[str]
) -> list[tuple[int, bytes]]:
    rows = [(tree_size + offset, stored) for offset, stored in _subtrees(stack, event_hashes)]
    # Plain parameterized INSERTs: the append's hot path, without the ORM's per-object work.
    table = connection.ops.quote_name(AuditTreeNode._meta.db_table)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), INSERT_BATCH):
            chunk = rows[start : start + INSERT_BATCH]
            values = ", ".join(["(%s, %s)"] * len(chunk))
            cursor.execute(f'INSERT INTO {table} ("seq", "hashes") VALUES {values}', [v for row in chunk for v in row])
    return stack


def _subtrees(stack: list[tuple[int, bytes]], event_hashes: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(offset from 1, stored hashes) per new leaf, merging equal-sized subtrees on the right edge (`stack`, updated)."""
    for offset, event_hash in enumerate(event_hashes, start=1):
        completed = [merkle.event_leaf_hash(event_hash)]
        while stack and stack[-1][0] == len(completed) - 1:
            completed.append(merkle.node_hash(stack.pop()[1], completed[-1]))
        stack.append((len(completed) - 1, completed[-1]))
        yield offset, "".join(h.hex() for h in completed)


def subtree_rows(event_hashes: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(seq, stored hashes) for a tree built from seq 1 over these chain hashes: what the migration backfills."""
    return _subtrees([], event_hashes)
