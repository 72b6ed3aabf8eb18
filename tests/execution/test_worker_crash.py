"""A worker SIGKILLed mid-execution leaves nothing stuck, and nothing runs twice
unless the executor is idempotent."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import errors
from approvals.execution import runner
from approvals.models import ApprovalRequest
from approvals.states import State

from .harness import Worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def kill_mid_execution(approved, receiver, **worker_env) -> ApprovalRequest:
    """Approve a webhook whose receiver hangs, SIGKILL the worker while it waits,
    then let the lease run out."""
    worker = Worker(**worker_env)
    try:
        request = approved("notify_webhook", {"text": "rotate keys"}, {"url": f"{receiver.url}/hang"})
        assert receiver.arrived.wait(20), worker.log()
    finally:
        worker.kill()
    receiver.release()
    row = ApprovalRequest.objects.get(pk=request.pk)
    assert row.state == State.EXECUTING  # stuck, for now
    assert runner.resolve_executions(now=row.lease_until - timedelta(seconds=1)) == {"retried": 0, "lost": 0}
    # The worker is gone for good: its lease runs out now (moved into the past on the
    # row every process reads) instead of after a sleep as long as the lease.
    ApprovalRequest.objects.filter(pk=row.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    return row


def test_a_non_idempotent_execution_ends_outcome_unknown_and_is_not_repeated(
    broker, approved, receiver, outbound_loopback
):
    row = kill_mid_execution(approved, receiver)
    assert runner.resolve_executions() == {"retried": 0, "lost": 1}
    row.refresh_from_db()
    assert (row.state, row.resolution_code) == (State.FAILED, errors.OUTCOME_UNKNOWN)
    assert len(receiver.posts) == 1


def test_an_idempotent_execution_is_retried_with_the_same_key(broker, approved, receiver, outbound_loopback, settings):
    settings.WEBHOOK_EXECUTOR_IDEMPOTENT = True
    row = kill_mid_execution(approved, receiver, WEBHOOK_EXECUTOR_IDEMPOTENT="1")
    receiver.arrived.clear()
    survivor = Worker(WEBHOOK_EXECUTOR_IDEMPOTENT="1")
    try:
        assert runner.resolve_executions() == {"retried": 1, "lost": 0}
        wait_for(lambda: ApprovalRequest.objects.get(pk=row.pk).state == State.SUCCEEDED, what="the retry")
    finally:
        survivor.stop()
    row.refresh_from_db()
    assert row.attempts == 2
    assert [post["headers"]["Idempotency-Key"] for post in receiver.posts] == [row.execution_key] * 2
