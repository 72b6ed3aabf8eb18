"""Named subjects for audit tests.

Requests and agents are stand-ins with the attributes audit.chain reads (`pk`,
`agent_id`, `name`), so these tests do not depend on other apps' models.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from audit.chain import Actor, record
from hitl_controlplane.ed25519 import SigningKey


@pytest.fixture
def alice(django_user_model):
    """A reviewer."""
    return django_user_model.objects.create_user(username="alice", password="unused-password-1")


@pytest.fixture
def mail_bot() -> SimpleNamespace:
    """An agent that sends mail."""
    return SimpleNamespace(pk=7, name="mail-bot")


@pytest.fixture
def refund_request(mail_bot) -> SimpleNamespace:
    """A request from mail-bot to refund an order."""
    return SimpleNamespace(pk=uuid.UUID("6f1c1f52-4c7e-4d59-9d3a-1f2e3d4c5b6a"), agent_id=mail_bot.pk)


@pytest.fixture
def system() -> Actor:
    return Actor.system()


@pytest.fixture(autouse=True)
def start_from_an_empty_log(request):
    """Give every database test an empty audit log, so seqs in tests start at 1.

    post_migrate (after migrate and after each test flush) seeds the policy, which
    records `policy.changed`; these tests are about the log itself, so they clear
    it through the maintenance path first (rolled back with the test, or flushed).
    """
    marker = request.node.get_closest_marker("django_db")
    if marker is None:
        return
    transactional = marker.kwargs.get("transaction", bool(marker.args and marker.args[0]))
    request.getfixturevalue("transactional_db" if transactional else "db")

    from django.db import connection

    from audit.db import maintenance
    from audit.models import AuditEvent, AuditTreeNode

    with maintenance(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table}")
        cursor.execute(f"DELETE FROM {AuditTreeNode._meta.db_table}")  # the tree over them goes too


# --- Exports, verification and the auditors' pages ----------------------------------------

SIGNING_SECRET = "test-audit-signing-secret-held-by-the-server-0123456789"
# What the auditor pins: the server's public key, never its secret.
SIGNING_KEY = [SigningKey.from_secret(SIGNING_SECRET).public]
SIGNING_KEY_ID = SigningKey.from_secret(SIGNING_SECRET).key_id


@pytest.fixture(autouse=True)
def audit_signing(settings, tmp_path):
    """A known audit signing key (whose public half the auditor pins) and a private checkpoint directory."""
    settings.AUDIT_SIGNING_KEY = SIGNING_SECRET
    settings.AUDIT_PREVIOUS_SIGNING_KEY = ""
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"
    return SIGNING_KEY


@pytest.fixture
def auditor_ann(django_user_model):
    """Ann audits: a member of the `auditors` group, nothing else."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="ann", password="unused-password-2")
    _already_member(user, Group.objects.get(name="auditors"))
    return user


@pytest.fixture
def reviewer(django_user_model):
    """Bob reviews requests: a member of `reviewers`, not of `auditors`."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="bob", password="unused-password-3")
    _already_member(user, Group.objects.get(name="reviewers"))
    return user


def _already_member(user, group) -> None:
    """Make `user` a member of `group` as a starting fact, not a change under test.

    `user.groups.add()` records `group.membership_changed` (controlplane.accounts.membership);
    these tests count the log's events from seq 1, so the membership is written as a
    bare through row, which sends no signal.
    """
    user.groups.through.objects.create(user=user, group=group)


@pytest.fixture
def mallory(django_user_model):
    """Mallory is signed in and belongs to no group."""
    return django_user_model.objects.create_user(username="mallory", password="unused-password-4")


@pytest.fixture
def eight_events(alice, refund_request, system) -> None:
    """A refund's story, with awkward text in it (commas, quotes, newlines, a formula)."""
    user = Actor.for_user(alice)
    record(
        "request.submitted",
        actor=Actor.for_agent(type("A", (), {"pk": 7, "name": "mail-bot"})()),
        request=refund_request,
        metadata={"note": 'says "hi",\nthen leaves'},
    )
    record(
        "request.queued",
        actor=system,
        request=refund_request,
        metadata={"risk_level": "high", "rule": "refunds", "to": "pending_approval"},
    )
    record("decision.recorded", actor=user, request=refund_request, metadata={"verdict": "approve"})
    record("request.approved", actor=user, request=refund_request, metadata={"to": "approved"})
    record("request.execution_claimed", actor=system, request=refund_request, metadata={"memo": "=SUM(A1:A9)"})
    record("request.succeeded", actor=system, request=refund_request, metadata={"to": "succeeded"})
    record("policy.changed", actor=user, metadata={"amount": "12.30", "é": "ünïcödé"})
    record("agent.created", actor=user, metadata={"name": "-rm -rf"})
