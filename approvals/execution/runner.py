"""Running approved requests on the server, and the sweeps that leave nothing behind.

`execute(request_id)` is the whole life of one attempt: claim (which re-validates)
or reclaim, run the executor with the approved params and the idempotency key,
then record `succeeded` / `failed` or defer a retry, every step through
`approvals.services`. It is safe to call any number of times, from any number of
workers, for the same request: the conditional claim lets exactly one caller run
the side effect, and a task for a request already claimed does nothing.

The sweeps (Celery beat, `approvals.execution.tasks`) make the database the source of truth:
`enqueue_pending` republishes approved requests whose task was never published
or was lost, `resolve_executions` retries deferred attempts and settles executions
whose lease ran out (re-run when the executor is idempotent, otherwise failed
with ``outcome_unknown`` for people to check). Plain functions, so tests call them
directly.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from audit.chain import Actor

from .. import errors, services
from ..emergency import is_stopped
from ..errors import DomainError
from ..models import ApprovalRequest
from ..states import State
from .executors import registry
from .executors.base import ExecutionContext, ExecutionError

__all__ = ["WORKER", "backoff_seconds", "enqueue", "enqueue_pending", "execute", "resolve_executions", "sweep"]

logger = logging.getLogger(__name__)

WORKER = Actor.system("worker")
SWEEPER = Actor.system("sweeper")


def backoff_seconds(attempt: int) -> int:
    """Delay before attempt `attempt + 1`: exponential from EXECUTION_RETRY_BASE_SECONDS, capped."""
    delay = settings.EXECUTION_RETRY_BASE_SECONDS * (2 ** max(0, attempt - 1))
    return int(min(delay, settings.EXECUTION_RETRY_MAX_SECONDS))


# --- Publishing -----------------------------------------------------------------------

EXECUTE_TASK = "approvals.execute_request"  # approvals.execution.tasks.execute_request


def enqueue(request_id: str) -> bool:
    """Publish the execution task for `request_id`; False if the broker refused.

    A failure is logged, not raised: this runs after a commit (often inside a
    reviewer's HTTP request), and the sweeper publishes whatever is left.
    """
    try:
        # By name: the task module imports this one, never the other way round.
        current_app.send_task(
            EXECUTE_TASK,
            args=[str(request_id)],
            retry=True,
            retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5},
        )
    except Exception:  # the broker is down: the sweeper republishes from the database
        logger.warning("could not publish the execution of %s; the sweeper will retry", request_id, exc_info=True)
        return False
    services.mark_enqueued(request_id)
    return True


def publish_approved(sender, change, **kwargs) -> None:
    """`request_changed` subscriber: publish the execution of a request just approved,
    when a server-side executor runs it (the approving transition recorded which)."""
    if (
        change.is_transition
        and change.to_state == State.APPROVED
        and ApprovalRequest.objects.filter(pk=change.request_id, has_execution_step=True).exclude(executor="").exists()
    ):
        enqueue(change.request_id)


# --- One attempt ------------------------------------------------------------------------


def execute(request_id: str) -> str:
    """Run one attempt of `request_id` if it is due; return what happened (for logs and tests).

    Outcomes: ``succeeded``, ``failed``, ``deferred``, ``refused:<code>`` (claim
    refused: already claimed, emergency stop, re-validation failed), ``skipped:<state>``,
    ``agent_executes``, ``missing``, ``late`` (the lease was lost before the report).
    """
    request = ApprovalRequest.objects.filter(pk=request_id).only("state", "executor").first()
    if request is None:
        return "missing"
    if not request.executor:
        return "agent_executes"
    executor = registry.get(request.executor)
    try:
        if request.state == State.APPROVED:
            grant = services.claim_execution(request_id, actor=WORKER)
        elif request.state == State.EXECUTING:
            grant = services.reclaim_execution(request_id, actor=WORKER, idempotent=executor.idempotent)
        else:
            return f"skipped:{request.state}"
    except DomainError as exc:
        if exc.code == errors.EMERGENCY_STOP:
            services.release_enqueue(request_id)
        logger.info("execution of %s refused: %s", request_id, exc.code)
        return f"refused:{exc.code}"

    request = ApprovalRequest.objects.select_related("agent").get(pk=request_id)
    context = ExecutionContext(
        request_id=str(request.pk),
        action_type=request.action_type,
        target=request.target,
        params=grant.params,
        idempotency_key=grant.idempotency_key,
        attempt=request.attempts,
        deadline=grant.lease_until,
        agent_name=request.agent.name,
    )
    return _run(executor, context, token=grant.token)


def _run(executor, context: ExecutionContext, *, token: str) -> str:
    outcome: dict[str, Any]
    try:
        result = executor.run(context)
    except ExecutionError as exc:
        if exc.retryable and context.attempt < settings.EXECUTION_MAX_ATTEMPTS:
            retry_at = timezone.now() + timedelta(seconds=backoff_seconds(context.attempt))
            # Bound here: Python unbinds `exc` when the except block ends, and the lambda must not depend on
            # _report calling it before then.
            error, code = exc.message, exc.code
            return _report(
                context,
                "deferred",
                lambda: services.defer_execution(
                    context.request_id, token=token, actor=WORKER, error=error, code=code, retry_at=retry_at
                ),
            )
        suffix = f" (gave up after {context.attempt} attempts)" if exc.retryable else ""
        outcome = {"succeeded": False, "error": exc.message + suffix, "code": exc.code}
    except Exception as exc:  # a bug, or a failure after the side effect: never retried
        logger.exception("executor %s crashed on %s", executor.name, context.request_id)
        outcome = {"succeeded": False, "error": f"{type(exc).__name__}: {exc}", "code": "executor_crashed"}
    else:
        outcome = {"succeeded": True, "result": result}
    label = "succeeded" if outcome["succeeded"] else "failed"
    return _report(
        context, label, lambda: services.complete_execution(context.request_id, token=token, actor=WORKER, **outcome)
    )


def _report(context: ExecutionContext, label: str, call) -> str:
    try:
        call()
    except DomainError as exc:
        # The lease ran out and the sweeper settled it (or another attempt took over):
        # the database already holds the truth; this late report changes nothing.
        logger.warning("late report for %s (%s): %s", context.request_id, label, exc.code)
        return "late"
    return label


# --- Sweeps --------------------------------------------------------------------------------


def _not_stopped():
    """Memoise `is_stopped` per agent within one sweep."""
    seen: dict[int, bool] = {}

    def check(request: ApprovalRequest) -> bool:
        if request.agent_id not in seen:
            seen[request.agent_id] = is_stopped(request.agent)
        return not seen[request.agent_id]

    return check


def enqueue_pending(*, now=None, limit: int = 200) -> int:
    """Publish approved server-executed requests that were never published, or whose
    task has been waiting longer than EXECUTION_REPUBLISH_SECONDS (a lost message)."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.EXECUTION_ENQUEUE_GRACE_SECONDS)
    stale = timedelta(seconds=settings.EXECUTION_REPUBLISH_SECONDS)
    candidates = (
        ApprovalRequest.objects.filter(state=State.APPROVED, has_execution_step=True)
        .exclude(executor="")
        .filter(Q(enqueued_at__isnull=True, decided_at__lte=now - grace) | Q(enqueued_at__lte=now - stale))
        .filter(Q(execute_by__isnull=True) | Q(execute_by__gt=now))
        .select_related("agent")
        .order_by("decided_at")[:limit]
    )
    runnable = _not_stopped()
    return sum(enqueue(str(request.pk)) for request in candidates if runnable(request))


def resolve_executions(*, now=None, limit: int = 200) -> dict[str, int]:
    """Settle `executing` rows whose lease has run out.

    A deferred retry that is due is republished. A lost claim (the worker or agent
    never reported) is republished when its executor is idempotent and attempts
    remain, and otherwise failed with ``outcome_unknown``. Under an emergency stop
    nothing is republished; lost claims that cannot be retried still fail.
    """
    now = now or timezone.now()
    counts = {"retried": 0, "lost": 0}
    rows = (
        ApprovalRequest.objects.filter(state=State.EXECUTING, lease_until__lte=now)
        .select_related("agent")
        .order_by("lease_until")[:limit]
    )
    runnable = _not_stopped()
    for request in rows:
        executor = registry.get(request.executor) if request.executor else None
        deferred = not request.grant_hash
        retry = executor is not None and (
            deferred or (executor.idempotent and request.attempts < settings.EXECUTION_MAX_ATTEMPTS)
        )
        if retry:
            if runnable(request) and enqueue(str(request.pk)):
                counts["retried"] += 1
        elif services.fail_lost_execution(request.pk):
            counts["lost"] += 1
    return counts


def sweep(*, now=None) -> dict[str, Any]:
    """Every sweep in order; what beat runs (as separate tasks) and tests call."""
    expired = services.expire_overdue(now=now)
    enqueued = enqueue_pending(now=now)
    return {"expired": expired, "enqueued": enqueued, **resolve_executions(now=now)}
