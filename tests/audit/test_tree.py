"""The Merkle tree is kept with the append: its roots and proofs match the events' leaves."""

from __future__ import annotations

import pytest
from django.db import connection

from audit import tree
from audit.chain import audited_atomic, record
from audit.db import maintenance
from audit.models import AuditEvent, AuditTreeNode
from hitl_controlplane import merkle


def _leaves() -> list[bytes]:
    return [merkle.event_leaf_hash(h) for h in AuditEvent.objects.order_by("seq").values_list("hash", flat=True)]


def _append(system, blocks: list[int]) -> None:
    for count in blocks:
        with audited_atomic():
            for _ in range(count):
                record("request.queued", actor=system)


@pytest.mark.django_db
def test_every_append_extends_the_tree_in_its_transaction(system):
    _append(system, [1, 2, 1, 5, 3, 8, 1])
    leaves = _leaves()
    assert tree.size() == len(leaves) == 21
    for size in range(1, 22):
        assert tree.root(size) == merkle.root(leaves[:size])
        for seq in (1, size // 2 + 1, size):
            proof = tree.inclusion_proof(seq, size)
            assert proof == merkle.inclusion_proof(seq - 1, leaves[:size])
            assert merkle.verify_inclusion(seq - 1, size, leaves[seq - 1], proof, tree.root(size))
        for first in (1, (size + 1) // 2, size):
            proof = tree.consistency_proof(first, size)
            assert merkle.verify_consistency(first, size, tree.root(first), tree.root(size), proof)


@pytest.mark.django_db
def test_a_rolled_back_block_leaves_no_tree_rows(system):
    _append(system, [2])
    with pytest.raises(RuntimeError), audited_atomic():
        record("request.queued", actor=system)
        raise RuntimeError("the business change failed")
    _append(system, [1])
    assert tree.size() == 3
    assert tree.root(3) == merkle.root(_leaves())


@pytest.mark.django_db
def test_events_stored_past_the_tree_are_caught_up_by_the_next_append(system):
    _append(system, [3, 4])
    tree._edge_missed = True  # the edge read with the head sees the tree short of the chain
    with connection.cursor() as cursor:  # rows that predate the tree, or a bulk fill
        cursor.execute(f"DELETE FROM {AuditTreeNode._meta.db_table} WHERE seq > 2")
    _append(system, [2])
    assert tree.size() == 9
    assert tree.root(9) == merkle.root(_leaves())


@pytest.mark.django_db
def test_a_tail_removed_under_maintenance_is_dropped_from_the_tree(system):
    _append(system, [6])
    with maintenance(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table} WHERE seq > 4")
    _append(system, [1])
    assert tree.size() == 5
    assert tree.root(5) == merkle.root(_leaves())


@pytest.mark.django_db
def test_sizes_beyond_the_tree_are_a_gap(system):
    _append(system, [3])
    with pytest.raises(tree.TreeGap):
        tree.root(4)
    with pytest.raises(tree.TreeGap):
        tree.inclusion_proof(1, 5)


def test_the_migration_backfill_builds_the_same_rows_as_the_append():
    hashes = [f"{i:064x}" for i in range(1, 12)]
    leaves = [merkle.event_leaf_hash(h) for h in hashes]
    rows = dict(tree.subtree_rows(hashes))
    assert rows[8] == "".join(merkle.range_hash(leaves, 8 - (1 << lv), 8).hex() for lv in range(4))
    assert rows[11] == leaves[10].hex()


@pytest.mark.django_db
def test_an_append_rolled_back_after_it_ran_leaves_no_stale_edge(system):
    from django.db import transaction

    _append(system, [3])
    with pytest.raises(RuntimeError), transaction.atomic():
        _append(system, [2])  # appended, with its tree rows and this process's remembered edge...
        raise RuntimeError("...then the outer transaction rolls back")
    _append(system, [1])
    assert tree.size() == 4
    assert tree.root(4) == merkle.root(_leaves())


@pytest.mark.django_db
def test_after_another_process_appended_the_edge_is_read(system, django_assert_max_num_queries):
    _append(system, [5])
    tree._last_edge = None  # what another process's append looks like from here
    _append(system, [2])  # a second query reads the edge...
    assert tree.edge_wanted()  # ...and the next append reads it with the head
    tree._last_edge = None
    # SAVEPOINT, RELEASE, the head with the edge, the events' INSERT, the tree's INSERT: no second read.
    with django_assert_max_num_queries(5):
        _append(system, [3])
    assert tree.root(10) == merkle.root(_leaves())
