"""Real Celery workers on the test database (Redis broker in CI, the embedded
filesystem broker elsewhere): approved requests run exactly once."""

from __future__ import annotations

import pytest
from django.db import transaction

from approvals import errors
from approvals.emergency import set_emergency_stop
from approvals.execution import runner
from approvals.execution.tasks import execute_request
from approvals.models import ApprovalRequest
from approvals.states import State

from .harness import Worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        process = Worker()
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def loopback_webhooks(outbound_loopback):
    """The test process and the workers agree: loopback receivers are allowed."""


def settled(request, *states: str):
    def check():
        row = ApprovalRequest.objects.get(pk=request.pk)
        return row if row.state in states else None

    return wait_for(check, what=f"{request.action_type} to become {' or '.join(states)}")


def test_an_approved_noop_request_succeeds(broker, worker, approved):
    request = approved("demo_restart_service", {"service": "search"})
    row = settled(request, State.SUCCEEDED, State.FAILED)
    assert row.state == State.SUCCEEDED, row.error
    assert row.result["idempotency_key"] == row.execution_key


def test_an_approved_webhook_is_posted_exactly_once_with_its_key(broker, worker, approved, receiver):
    request = approved("notify_webhook", {"text": "deploy finished"}, {"url": f"{receiver.url}/hooks/deploy"})
    row = settled(request, State.SUCCEEDED, State.FAILED)
    assert row.state == State.SUCCEEDED, row.error
    [post] = receiver.posts
    assert post["headers"]["Idempotency-Key"] == row.execution_key


def test_the_same_task_enqueued_again_and_again_runs_the_side_effect_once(broker, worker, approved, receiver):
    request = approved("notify_webhook", {"text": "once"}, {"url": f"{receiver.url}/hooks/once"})
    for _ in range(5):
        execute_request.delay(str(request.pk))
    settled(request, State.SUCCEEDED)
    wait_for(lambda: "skipped:succeeded" in worker.log(), what="the duplicate deliveries to be consumed")
    assert len(receiver.posts) == 1


def test_two_workers_racing_run_the_side_effect_once(broker, worker, approved, receiver):
    second = Worker()
    try:
        requests = [approved("notify_webhook", {"n": n}, {"url": f"{receiver.url}/hooks/race"}) for n in range(4)]
        for request in requests:
            for _ in range(3):
                execute_request.delay(str(request.pk))
        for request in requests:
            settled(request, State.SUCCEEDED)
    finally:
        second.stop()
    keys = [post["headers"]["Idempotency-Key"] for post in receiver.posts]
    assert sorted(keys) == sorted(ApprovalRequest.objects.get(pk=r.pk).execution_key for r in requests)


def test_an_emergency_stop_holds_execution_until_it_is_lifted(broker, worker, approved, ops_submit, ops_bot):
    try:
        # Approved just before the stop (no approval is taken while it is on): the
        # task is published after both commit, so the worker meets the stop.
        with transaction.atomic():
            request = approved("demo_restart_service", {"service": "billing"})
            set_emergency_stop(on=True, reason="incident drill")
        assert ops_submit("read_file", {"path": "README"}).state == State.PENDING_APPROVAL
        wait_for(lambda: f"refused:{errors.EMERGENCY_STOP}" in worker.log(), what="the worker to refuse")
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED
    finally:
        set_emergency_stop(on=False)
    assert runner.enqueue_pending() == 1  # the sweep, as beat runs it
    assert settled(request, State.SUCCEEDED, State.FAILED).state == State.SUCCEEDED
