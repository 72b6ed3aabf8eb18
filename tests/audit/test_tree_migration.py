"""Migration audit 0005 builds the tree over the events already stored, and leaves the triggers alone."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from audit import tree
from audit.chain import audited_atomic, record
from audit.db import missing_audit_triggers
from audit.models import AuditEvent
from hitl_controlplane import merkle


@pytest.mark.django_db(transaction=True)
def test_the_migration_backfills_the_tree_over_existing_events(system):
    with audited_atomic():
        for _ in range(13):
            record("request.queued", actor=system)
    executor = MigrationExecutor(connection)
    newest = executor.loader.graph.leaf_nodes()
    executor.migrate([("audit", "0004_event_signatures")])  # the tree table goes, the events stay
    try:
        assert AuditEvent.objects.count() == 13
    finally:
        MigrationExecutor(connection).migrate(newest)

    hashes = list(AuditEvent.objects.order_by("seq").values_list("hash", flat=True))
    assert tree.size() == 13
    assert tree.root(13) == merkle.root([merkle.event_leaf_hash(h) for h in hashes])
    assert missing_audit_triggers() == []
    record("request.queued", actor=system)  # and the append carries on from the backfilled edge
    hashes.append(AuditEvent.objects.get(seq=14).hash)
    assert tree.root(14) == merkle.root([merkle.event_leaf_hash(h) for h in hashes])
