"""The execution engine in one process: which requests run on the server, how one
attempt goes, retries and leases driven by the database, and the sweeps.

`runner.execute` is exactly what the Celery task runs; here it is called directly
so time can be frozen. Publishing is replaced by a recorder, so nothing reaches
a broker from these tests (the worker tests do that for real).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import checks
from django.utils import timezone
from freezegun import freeze_time

from approvals import errors, services
from approvals.errors import DomainError
from approvals.execution import runner
from approvals.execution.executors import (
    Executor,
    PermanentExecutionError,
    RetryableExecutionError,
    register,
)
from approvals.models import ApprovalRequest
from approvals.services.execution import executor_name_for
from approvals.states import State
from audit.models import AuditEvent


class Flaky(Executor):
    """Fails retryably `failures` times, then succeeds; remembers every key it saw."""

    name = "flaky"
    idempotent = False

    def __init__(self) -> None:
        self.failures = 0
        self.keys: list[str] = []

    def run(self, context):
        self.keys.append(context.idempotency_key)
        if len(self.keys) <= self.failures:
            raise RetryableExecutionError("the mail server said 421, try later", code="busy")
        return {"delivered": True}


class Broken(Executor):
    name = "broken"

    def run(self, context):
        raise PermanentExecutionError("the recipient does not exist", code="no_such_recipient")


FLAKY = register(Flaky(), replace=True)
register(Broken(), replace=True)


@pytest.fixture(autouse=True)
def engine_executors(settings):
    settings.EXECUTORS = {
        "demo_*": "noop",
        "flaky_*": "flaky",
        "broken_call": "broken",
        "notify_webhook": "webhook",
        "send_email": "email",
    }
    settings.EXECUTION_MAX_ATTEMPTS = 3
    settings.EXECUTION_RETRY_BASE_SECONDS = 10
    FLAKY.failures = 0
    FLAKY.keys.clear()


@pytest.fixture
def published(monkeypatch):
    """Every request id the sweeps publish, instead of a broker."""
    ids: list[str] = []

    def record(request_id: str) -> bool:
        ids.append(str(request_id))
        services.mark_enqueued(request_id)
        return True

    monkeypatch.setattr(runner, "enqueue", record)
    return ids


def fetch(request) -> ApprovalRequest:
    return ApprovalRequest.objects.get(pk=request.pk)


def verbs(request) -> list[str]:
    return list(AuditEvent.objects.filter(request_id=request.pk).order_by("seq").values_list("verb", flat=True))


class TestWhichRequestsRunOnTheServer:
    def test_the_mapping_prefers_exact_names_then_the_first_matching_pattern(self, settings):
        settings.EXECUTORS = {"demo_*": "noop", "demo_mail": "email", "notify_*": "webhook"}
        assert executor_name_for("demo_mail") == "email"
        assert executor_name_for("demo_restart") == "noop"
        assert executor_name_for("read_file") == ""

    def test_a_misspelt_executor_stops_the_server_from_starting(self, settings):
        settings.EXECUTORS = {"demo_*": "nopo"}
        errors = checks.run_checks()
        assert [(e.id, e.msg) for e in errors if e.id == "approvals.E001"] == [
            ("approvals.E001", "settings.EXECUTORS names the executor 'nopo', which is not registered.")
        ]

    def test_approval_records_the_executor_and_publishes_after_commit(
        self, approved, django_capture_on_commit_callbacks, published
    ):
        with django_capture_on_commit_callbacks(execute=True):
            request = approved("demo_restart", {"service": "search"})
        assert fetch(request).executor == "noop"
        assert published == [str(request.pk)]
        assert fetch(request).enqueued_at is not None

    def test_requests_the_agent_executes_are_never_published(
        self, ops_submit, django_capture_on_commit_callbacks, published
    ):
        with django_capture_on_commit_callbacks(execute=True):
            request = ops_submit("read_file", {"path": "README"})
        assert (request.state, fetch(request).executor) == (State.APPROVED, "")
        assert published == []
        assert runner.execute(str(request.pk)) == "agent_executes"


class TestOneAttempt:
    def test_a_noop_request_succeeds_with_the_approved_params_and_key(self, approved):
        request = approved("demo_restart", {"service": "search"})
        assert runner.execute(str(request.pk)) == "succeeded"
        request = fetch(request)
        assert request.state == State.SUCCEEDED
        assert request.result["idempotency_key"] == request.execution_key
        assert request.result["param_keys"] == ["service"]
        assert verbs(request)[-2:] == ["request.execution_claimed", "request.succeeded"]

    def test_a_second_delivery_of_the_same_task_changes_nothing(self, approved):
        request = approved("demo_restart", {"service": "search"})
        assert runner.execute(str(request.pk)) == "succeeded"
        assert runner.execute(str(request.pk)) == "skipped:succeeded"
        assert verbs(request).count("request.execution_claimed") == 1

    def test_a_permanent_failure_fails_the_request_with_its_message(self, approved):
        request = approved("broken_call", {"to": "nobody"})
        assert runner.execute(str(request.pk)) == "failed"
        request = fetch(request)
        assert (request.state, request.resolution_code) == (State.FAILED, "no_such_recipient")
        assert request.error == "the recipient does not exist"


class TestRetriesLiveInTheDatabase:
    def test_a_retryable_failure_defers_with_backoff_and_keeps_the_key(self, approved, published):
        FLAKY.failures = 1
        request = approved("flaky_send", {"to": "dana"})
        start = timezone.now()
        assert runner.execute(str(request.pk)) == "deferred"
        row = fetch(request)
        assert (row.state, row.grant_hash, row.attempts) == (State.EXECUTING, "", 1)
        assert row.next_attempt_at - start >= timedelta(seconds=10)
        # Not due yet: another delivery does nothing, the sweep publishes nothing.
        assert runner.execute(str(request.pk)) == "refused:already_claimed"
        assert runner.resolve_executions() == {"retried": 0, "lost": 0}

        with freeze_time(row.next_attempt_at + timedelta(seconds=1)):
            assert runner.resolve_executions() == {"retried": 1, "lost": 0}
            assert published[-1] == str(request.pk)
            assert runner.execute(str(request.pk)) == "succeeded"
        row = fetch(request)
        assert (row.state, row.attempts) == (State.SUCCEEDED, 2)
        assert FLAKY.keys == [row.execution_key, row.execution_key]
        assert "request.execution_deferred" in verbs(request)
        assert "request.execution_reclaimed" in verbs(request)

    def test_the_attempt_count_is_bounded(self, approved):
        FLAKY.failures = 99
        request = approved("flaky_send", {"to": "dana"})
        for attempt in range(1, 4):
            with freeze_time(timezone.now() + timedelta(minutes=attempt)):
                outcome = runner.execute(str(request.pk))
        assert outcome == "failed"
        row = fetch(request)
        assert (row.state, row.attempts) == (State.FAILED, 3)
        assert "gave up after 3 attempts" in row.error
        assert len(FLAKY.keys) == 3

    def test_the_backoff_grows_and_is_capped(self, settings):
        settings.EXECUTION_RETRY_BASE_SECONDS = 10
        settings.EXECUTION_RETRY_MAX_SECONDS = 60
        assert [runner.backoff_seconds(n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 60, 60]


class TestLostLeases:
    def _claim_and_vanish(self, request):
        """A worker claims, then dies before reporting."""
        return services.claim_execution(request.pk, actor=runner.WORKER)

    def test_a_lost_non_idempotent_execution_fails_as_outcome_unknown(self, approved, published):
        request = approved("flaky_send", {"to": "dana"})
        grant = self._claim_and_vanish(request)
        assert runner.resolve_executions() == {"retried": 0, "lost": 0}
        with freeze_time(grant.lease_until + timedelta(seconds=1)):
            assert runner.resolve_executions() == {"retried": 0, "lost": 1}
        row = fetch(request)
        assert (row.state, row.resolution_code) == (State.FAILED, errors.OUTCOME_UNKNOWN)
        assert published == [] and FLAKY.keys == []

    def test_a_lost_idempotent_execution_runs_again_with_the_same_key(self, approved, published):
        request = approved("demo_restart", {"service": "search"})
        grant = self._claim_and_vanish(request)
        with freeze_time(grant.lease_until + timedelta(seconds=1)):
            assert runner.resolve_executions() == {"retried": 1, "lost": 0}
            assert runner.execute(str(request.pk)) == "succeeded"
        row = fetch(request)
        assert row.result["idempotency_key"] == grant.idempotency_key == row.execution_key
        assert row.attempts == 2
        # The dead worker's grant is worthless now.
        with pytest.raises(DomainError):
            services.complete_execution(request.pk, token=grant.token, succeeded=True, actor=runner.WORKER)

    def test_a_late_report_after_the_sweep_settled_it_changes_nothing(self, approved):
        request = approved("flaky_send", {"to": "dana"})
        grant = self._claim_and_vanish(request)
        with freeze_time(grant.lease_until + timedelta(seconds=1)):
            runner.resolve_executions()
        outcome = runner._report(  # what the slow worker does when it finally returns
            runner.ExecutionContext(
                request_id=str(request.pk),
                action_type="flaky_send",
                target={},
                params={},
                idempotency_key=grant.idempotency_key,
                attempt=1,
                deadline=grant.lease_until,
            ),
            "succeeded",
            lambda: services.complete_execution(request.pk, token=grant.token, succeeded=True, actor=runner.WORKER),
        )
        assert outcome == "late"
        assert fetch(request).resolution_code == errors.OUTCOME_UNKNOWN

    def test_an_agent_that_never_reports_is_settled_too(self, ops_submit, ops_bot):
        request = ops_submit("read_file", {"path": "README"})
        grant = services.claim_execution(request.pk, actor=runner.WORKER, agent=ops_bot)
        with freeze_time(grant.lease_until + timedelta(seconds=1)):
            assert runner.resolve_executions() == {"retried": 0, "lost": 1}


class TestNeverEnqueued:
    def test_an_approval_whose_publish_was_lost_is_published_by_the_sweep(self, approved, published, settings):
        settings.EXECUTION_ENQUEUE_GRACE_SECONDS = 15
        request = approved("demo_restart", {"service": "search"})  # on_commit never ran: the "crash"
        assert fetch(request).enqueued_at is None
        assert runner.enqueue_pending() == 0  # still within the grace period
        with freeze_time(timezone.now() + timedelta(seconds=16)):
            assert runner.enqueue_pending() == 1
        assert published == [str(request.pk)]

    def test_a_published_task_that_never_ran_is_published_again(self, approved, published, settings):
        settings.EXECUTION_REPUBLISH_SECONDS = 120
        request = approved("demo_restart", {"service": "search"})
        services.mark_enqueued(request.pk)
        with freeze_time(timezone.now() + timedelta(seconds=60)):
            assert runner.enqueue_pending() == 0
        with freeze_time(timezone.now() + timedelta(seconds=121)):
            assert runner.enqueue_pending() == 1

    def test_the_sweep_expires_what_is_overdue(self, approved, published):
        request = approved("demo_restart", {"service": "search"})
        with freeze_time(fetch(request).execute_by + timedelta(seconds=1)):
            result = runner.sweep()
        assert result["expired"] == 1 and published == []
        assert fetch(request).state == State.EXPIRED
