"""The scheduled verification task: it records each run, raises `audit.chain_broken`
on a break, writes signed checkpoints outside the database, and catches a
consistently rewritten chain through them."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from audit.chain import Actor, record
from audit.checkpoint import read_checkpoints
from audit.db import maintenance
from audit.models import AuditEvent, ChainVerification
from audit.tasks import verify_chain_task
from hitl_controlplane.manifest import signature_problem

from .conftest import SIGNING_KEY
from .rewriting import rewrite_chain_consistently


@pytest.fixture
def recorded_steps(alice, refund_request, system) -> None:
    for verb in ("request.submitted", "request.queued", "decision.recorded", "request.approved", "request.succeeded"):
        record(verb, actor=Actor.for_user(alice), request=refund_request, metadata={"step": verb})


@pytest.mark.django_db
def test_a_run_records_its_outcome_an_event_and_a_signed_checkpoint(recorded_steps, settings):
    outcome = verify_chain_task.apply().get()
    assert outcome == {"ok": True, "head_seq": 5, "bad_seq": None, "checkpoint": "checkpoint-000000000005.json"}
    run = ChainVerification.objects.get()
    assert (run.ok, run.from_seq, run.head_seq, run.checked, run.full) == (True, 1, 5, 5, True)
    event = AuditEvent.objects.get(seq=6)
    assert (event.verb, event.metadata["head_seq"], event.metadata["trigger"]) == ("audit.verified", 5, "scheduled")
    on_disk = json.loads((settings.AUDIT_CHECKPOINT_DIR / run.checkpoint_file).read_text())
    assert (on_disk["seq"], on_disk["hash"]) == (5, AuditEvent.objects.get(seq=5).hash)
    assert signature_problem(on_disk, SIGNING_KEY) is None


@pytest.mark.django_db
def test_later_runs_continue_from_the_last_good_head(recorded_steps):
    verify_chain_task.apply()
    record("request.failed", actor=Actor.system())
    verify_chain_task.apply()
    latest = ChainVerification.objects.latest()
    assert (latest.ok, latest.from_seq, latest.head_seq, latest.checked, latest.full) == (True, 6, 7, 2, False)


@pytest.mark.django_db
def test_an_edited_row_raises_chain_broken(recorded_steps):
    with maintenance(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {AuditEvent._meta.db_table} SET canonical = replace(canonical, 'queued', 'QUEUED') WHERE seq = 2"
        )
    outcome = verify_chain_task.apply(kwargs={"full": True}).get()
    assert (outcome["ok"], outcome["bad_seq"]) == (False, 2)
    alert = AuditEvent.objects.order_by("-seq").first()
    assert (alert.verb, alert.metadata["bad_seq"]) == ("audit.chain_broken", 2)
    assert not read_checkpoints(), "a broken chain is never checkpointed"


@pytest.mark.django_db
def test_a_consistent_rewrite_fails_its_signatures_and_the_checkpoint(recorded_steps):
    verify_chain_task.apply()  # checkpoint at seq 5
    rewrite_chain_consistently(from_seq=3, change={"step": "decision.recorded (rejected)"})
    from audit.chain import verify_chain

    rewritten = verify_chain()
    assert (rewritten.ok, rewritten.bad_seq) == (False, 3), "rehashing cannot re-sign without the key"
    assert "signature" in rewritten.reason
    outcome = verify_chain_task.apply(kwargs={"full": True}).get()
    assert (outcome["ok"], outcome["bad_seq"]) == (False, 5)
    assert "differs from signed checkpoint" in ChainVerification.objects.latest().reason


@pytest.mark.django_db
def test_a_forged_checkpoint_file_is_an_alert(recorded_steps, settings):
    settings.AUDIT_CHECKPOINT_DIR.mkdir(parents=True)
    (settings.AUDIT_CHECKPOINT_DIR / "checkpoint-000000000004.json").write_text(
        json.dumps({"type": "cp-audit-checkpoint/1", "seq": 4, "hash": "f" * 64, "time": "x"})
    )
    outcome = verify_chain_task.apply().get()
    assert not outcome["ok"]
    assert "not trustworthy" in ChainVerification.objects.latest().reason
