"""A database populated before the agent model was named by its setting migrates forward
keeping its rows, its audit triggers and a chain `audit_verify` accepts.

The old migrations were edited only where the state stays the same (a dependency or a
`to=` that names APPROVALS_AGENT_MODEL, which is "agents.Agent"), so a database migrated
by them is consistent with this graph; the one new migration (agents 0005) changes
options only. The report of issue 23 also did this by hand from a copy of main.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.emergency import set_emergency_stop
from audit.chain import Actor
from audit.db import missing_audit_triggers

# The last migration of each project app before this change.
BEFORE = [
    ("agents", "0004_one_delivery_shape"),
    ("approvals", "0012_request_submitted_sha256"),
    # Audit 0005 (the Merkle tree) came later and has its own test (tests/audit/test_tree_migration.py).
    ("audit", "0005_merkle_tree"),
    ("controlplane", "0001_provider_sessions"),
]
PROJECT_APPS = {app for app, _ in BEFORE}


def row_counts() -> dict[str, int]:
    """Rows per model of the project apps whose table exists (later migrations add tables)."""
    tables = set(connection.introspection.table_names())
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label in PROJECT_APPS and model._meta.db_table in tables
    }


@pytest.mark.django_db(transaction=True)
def test_a_populated_database_from_before_migrates_forward_intact(submit, agent, settings, tmp_path):
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"
    executor = MigrationExecutor(connection)
    newest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        submit()
        submit(params={"to": ["erin@example.com"], "subject": "Re", "body": "Thanks"})
        set_emergency_stop(on=True, agent=agent, actor=Actor.system(), reason="before the migration")
        before = row_counts()

        executor = MigrationExecutor(connection)
        executor.loader.check_consistent_history(connection)  # what `migrate` refuses to start without
        plan = executor.migration_plan(newest)
        # Approvals 0014 (Slack links, issue 26) and audit 0006 (witness cosignatures, issue 28)
        # only add tables, which start empty; approvals 0015 adds the Slack messages' outbox
        # columns and a rule's Slack channel, with defaults.
        assert sorted((migration.app_label, migration.name) for migration, _ in plan) == [
            ("agents", "0005_agent_named_by_a_setting"),
            ("approvals", "0014_slack_links"),
            ("approvals", "0015_slack_message_outbox"),
            ("audit", "0006_witness_cosignatures"),
        ]
    finally:
        executor.migrate(newest)

    after = row_counts()
    assert {label: after[label] for label in before} == before and before["approvals.ApprovalRequest"] == 2
    assert before["approvals.EmergencyStop"] == 1 and before["audit.AuditEvent"] > 0
    assert missing_audit_triggers() == []
    out = StringIO()
    call_command("audit_verify", "--no-record", stdout=out, stderr=StringIO())
    assert out.getvalue().startswith(f"OK: {before['audit.AuditEvent']} events verified")
