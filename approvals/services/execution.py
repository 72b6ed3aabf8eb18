"""Execution: re-validation right before running, run-once grants, outcomes, retries.

Every execution path (an agent's claim, a worker's first claim or its retry)
re-validates with `revalidate` and gets its grant from `_issue_grant`. A request
whose action type has a server-side executor (approvals.execution.executors) is published to
Celery after the approving transaction commits. The database, not the broker,
carries retries: a retryable failure gives the grant back and sets
`next_attempt_at` (`defer_execution`); the sweeper re-publishes due rows and
`reclaim_execution` takes a fresh grant under the same idempotency key. The signed
grant, renewals and reports after the lease ran out are `leases`'.
"""

from __future__ import annotations

import fnmatch
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone

from audit.chain import Actor, digest, record
from hitl_controlplane.grants import new_nonce

from .. import errors
from ..emergency import is_stopped
from ..errors import DomainError
from ..models import ApprovalRequest
from ..snapshots import current_target_hash
from ..states import State
from .classification import classify_params, stricter_than_request
from .core import SYSTEM, PersistedRefusal, RequestId, announce, changing, refuse_state, transition
from .guards import approvals_counted
from .leases import grant_hash, lease_lost, refuse_late_report, require_grant, signed_grant

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = [
    "ExecutionGrant",
    "claim_execution",
    "complete_execution",
    "defer_execution",
    "executor_name_for",
    "fail_lost_execution",
    "mark_enqueued",
    "server_executor",
    "reclaim_execution",
    "release_enqueue",
    "revalidate",
    "revalidation_refusal",
]


@dataclass(frozen=True)
class ExecutionGrant:
    """The single-use right to execute one approved revision, exactly as approved."""

    request_id: str
    token: str
    idempotency_key: str
    params: dict[str, Any]
    lease_until: datetime
    attempt: int = 1
    revision: int = 1
    # The server's signature over the grant document (hitl_controlplane.grants), binding
    # the claimant's nonce: what a client verifies before it runs anything.
    grant_signature: dict[str, Any] = field(default_factory=dict)


# --- Re-validation ------------------------------------------------------------------------


def revalidation_refusal(request: ApprovalRequest, *, target_hash: str | None = None) -> tuple[str, str] | None:
    """Why `request` may not execute now, as (code, message), or None. Writes nothing."""
    if is_stopped(request.agent):
        return errors.EMERGENCY_STOP, "The emergency stop is on; execution waits until it is lifted."
    if request.has_execution_step and request.execute_by and request.execute_by <= timezone.now():
        return errors.APPROVAL_EXPIRED, "The approval's execution window has passed."
    fresh = current_target_hash(request.action_type, request.target) or target_hash
    if fresh and fresh != request.target_hash:
        return errors.TARGET_CHANGED, "The target changed since it was approved; submit it again for approval."
    if not request.approved_by_policy and approvals_counted(request) < request.required_approvals:
        return (
            errors.APPROVER_PERMISSION_REVOKED,
            "An approver no longer holds the permission; the quorum no longer stands.",
        )
    fresh_classification = classify_params(request, request.current_params()).classification
    if stricter_than_request(request, fresh_classification):
        return (
            errors.POLICY_CHANGED,
            f"The current policy is stricter for this call ({fresh_classification.reason}); it needs approval again.",
        )
    return None


def revalidate(request: ApprovalRequest, *, actor: Actor, target_hash: str | None = None) -> None:
    """Re-validate a locked request right before (another attempt at) execution.

    An emergency stop refuses without changing anything (DomainError): the request
    runs once the stop is lifted. Any other refusal is final: the request moves to
    `expired` (an approval whose window passed before any claim) or `failed`, with
    the reason code, audited, and a PersistedRefusal is raised. A refused request
    is never re-opened; the agent resubmits.
    """
    refusal = revalidation_refusal(request, target_hash=target_hash)
    if refusal is None:
        return
    code, message = refusal
    if code == errors.EMERGENCY_STOP:
        raise DomainError(code, message, state=request.state)
    if code == errors.APPROVAL_EXPIRED and request.state == State.APPROVED:
        transition(request, State.EXPIRED, actor=actor, metadata={"code": code}, resolution_code=code)
    else:
        transition(
            request,
            State.FAILED,
            actor=actor,
            metadata={"code": code},
            resolution_code=code,
            error=message,
            finished_at=timezone.now(),
            grant_hash="",
        )
    raise PersistedRefusal(code, message, state=request.state)


# --- Grants -------------------------------------------------------------------------------


def _issue_grant(
    request: ApprovalRequest, *, actor: Actor, verb: str | None, metadata: dict[str, Any], nonce: str | None = None
) -> ExecutionGrant:
    """A fresh single-use grant on a locked, executing request: its token is stored as
    a hash only, and the lease and attempt count move on. `verb` None: the claim's
    transition already recorded and announced the event this grant belongs to.

    The grant document (hitl_controlplane.grants) is signed with the audit signing key
    (the key decisions are signed with) and binds `nonce`, the claimant's; a server-side
    executor, which claims in-process and checks nothing over a network, gets a
    server-made one.
    """
    token = secrets.token_urlsafe(32)
    request.grant_hash = grant_hash(token)
    request.lease_until = timezone.now() + timedelta(seconds=settings.EXECUTION_LEASE_SECONDS)
    request.next_attempt_at = None
    request.attempts += 1
    request.save(update_fields=["grant_hash", "lease_until", "next_attempt_at", "attempts"])
    if verb is not None:
        record(
            verb,
            actor=actor,
            request=request,
            metadata={"attempt": request.attempts, "idempotency_key": request.execution_key, **metadata},
        )
        announce(request, verb)
    params = request.current_params()
    return ExecutionGrant(
        request_id=str(request.pk),
        token=token,
        idempotency_key=request.execution_key,
        params=params,
        lease_until=request.lease_until,
        attempt=request.attempts,
        revision=request.current_revision,
        grant_signature=signed_grant(request, params, nonce=nonce or new_nonce()),
    )


def claim_execution(
    request_id: RequestId,
    *,
    actor: Actor,
    agent: Agent | None = None,
    target_hash: str | None = None,
    nonce: str | None = None,
) -> ExecutionGrant:
    """Re-validate and claim an approved request for execution: exactly one caller wins.

    `agent`: the claimant is this agent (its own requests only, and only those no
    server-side executor runs). `nonce`: the claimant's, bound into the signed grant
    (the API requires one; in-process executors get a server-made one). Returns the
    single-use grant with the exact approved params and the idempotency key the side
    effect must carry.
    """
    with changing(request_id, agent=agent) as request:
        if agent is not None and request.executor:
            raise DomainError(
                errors.EXECUTED_BY_SERVER,
                f"The server runs this request (executor {request.executor!r}); wait for its result instead.",
                state=request.state,
            )
        if request.state != State.APPROVED:
            raise DomainError(
                errors.ALREADY_CLAIMED if request.state == State.EXECUTING else errors.ILLEGAL_TRANSITION,
                f"The request is {request.state.replace('_', ' ')}; only an approved request can be claimed.",
                state=request.state,
            )
        revalidate(request, actor=actor, target_hash=target_hash)
        # The row is locked already; the conditional update is what makes a second
        # claimant (even one that skipped the lock) change nothing. The move records
        # `request.execution_claimed` with the attempt the grant below counts.
        transition(
            request,
            State.EXECUTING,
            actor=actor,
            only_if_state=State.APPROVED,
            lost_race=DomainError(errors.ALREADY_CLAIMED, "Another executor claimed this request first."),
            metadata={"attempt": request.attempts + 1, "idempotency_key": request.execution_key},
        )
        return _issue_grant(request, actor=actor, verb=None, metadata={}, nonce=nonce)


def reclaim_execution(
    request_id: RequestId, *, actor: Actor, idempotent: bool, max_attempts: int | None = None
) -> ExecutionGrant:
    """Take a fresh grant on an `executing` request whose next attempt is due.

    Due means: a deferred retry whose `next_attempt_at` has come, or (only when the
    executor is `idempotent`) a claim whose lease ran out with no report. The same
    re-validation as a first claim runs first. After `max_attempts` claims the
    request fails (``outcome_unknown`` for a lost lease, ``attempts_exhausted`` for
    retries).
    """
    max_attempts = max_attempts or settings.EXECUTION_MAX_ATTEMPTS
    with changing(request_id) as request:
        now = timezone.now()
        if request.state != State.EXECUTING:
            raise refuse_state(request, State.EXECUTING)
        deferred = not request.grant_hash
        if not request.lease_until or request.lease_until > now or not (deferred or idempotent):
            raise DomainError(
                errors.ALREADY_CLAIMED, "The execution is running or not due for another attempt.", state=request.state
            )
        if request.attempts >= max_attempts:
            code = errors.ATTEMPTS_EXHAUSTED if deferred else errors.OUTCOME_UNKNOWN
            transition(
                request,
                State.FAILED,
                actor=actor,
                metadata={"code": code, "attempts": request.attempts},
                resolution_code=code,
                error=f"Gave up after {request.attempts} attempts. {request.error}".strip(),
                finished_at=now,
                grant_hash="",
            )
            raise PersistedRefusal(errors.ATTEMPTS_EXHAUSTED, "No attempts left.", state=request.state)
        revalidate(request, actor=actor)
        return _issue_grant(
            request,
            actor=actor,
            verb="request.execution_reclaimed",
            metadata={"reason": "retry" if deferred else "lease_lost"},
        )


# --- Outcomes -----------------------------------------------------------------------------


def complete_execution(
    request_id: RequestId,
    *,
    token: str,
    succeeded: bool,
    actor: Actor,
    result: Any = None,
    error: str = "",
    code: str = "",
) -> ApprovalRequest:
    """Record the executor's outcome for the claim that `token` proves.

    `code` names why a failure failed (e.g. ``outcome_unknown``); it defaults to
    ``execution_failed`` and is ignored on success. The audit event carries the
    result's (and error's) keyed digest, never the value.

    A report after the claim's lease ran out changes no outcome: the request ends (or
    stays) failed with ``outcome_unknown``, the report is audited as
    ``request.completed_late`` with its digests, and `lease_expired` is raised (after
    commit, so the record stands).
    """
    now = timezone.now()
    with changing(request_id) as request:
        if lease_lost(request, token, now):
            refuse_late_report(request, actor=actor, succeeded=succeeded, result=result, error=error, now=now)
        require_grant(request, token)
        transition(
            request,
            State.SUCCEEDED if succeeded else State.FAILED,
            actor=actor,
            metadata={"result": digest(result), **({"error": digest(error)} if error else {})},
            result=result,
            error=error,
            finished_at=now,
            grant_hash="",
            resolution_code="succeeded" if succeeded else (code or "execution_failed"),
        )
    return request


def defer_execution(
    request_id: RequestId, *, token: str, actor: Actor, error: str, code: str, retry_at: datetime
) -> ApprovalRequest:
    """A retryable failure: give the grant back and schedule the next attempt.

    The request stays `executing` (its claim stands; the idempotency key is the
    same on every attempt) with no valid grant until `reclaim_execution`.
    """
    with changing(request_id) as request:
        require_grant(request, token)
        request.grant_hash = ""
        request.lease_until = retry_at
        request.next_attempt_at = retry_at
        request.error = error
        request.save(update_fields=["grant_hash", "lease_until", "next_attempt_at", "error"])
        record(
            "request.execution_deferred",
            actor=actor,
            request=request,
            metadata={
                "attempt": request.attempts,
                "code": code,
                "error": digest(error),
                "retry_at": retry_at.isoformat(),
            },
        )
        announce(request, "request.execution_deferred")
    return request


def fail_lost_execution(request_id: RequestId) -> bool:
    """An executing request whose lease ran out with no report: its outcome is unknown."""
    with changing(request_id) as request:
        if request.state != State.EXECUTING or not request.lease_until or request.lease_until > timezone.now():
            return False
        transition(
            request,
            State.FAILED,
            actor=SYSTEM,
            metadata={"code": errors.OUTCOME_UNKNOWN},
            resolution_code=errors.OUTCOME_UNKNOWN,
            error="The execution lease ran out with no result.",
            finished_at=timezone.now(),
            # The grant hash stays: a late report still proves which claim it came from.
        )
    return True


# --- Publishing to the worker ---------------------------------------------------------------


def executor_name_for(action_type: str) -> str:
    """The executor ``settings.EXECUTORS`` gives `action_type`, or "" (the agent executes).

    An exact key wins over patterns; among patterns, the first in the mapping's order.
    (A name no executor is registered under stops the server at start: a system check.)
    """
    mapping: dict[str, str] = settings.EXECUTORS
    name = mapping.get(action_type)
    if name is None:
        name = next((value for pattern, value in mapping.items() if fnmatch.fnmatchcase(action_type, pattern)), "")
    return name


def server_executor(request: ApprovalRequest) -> str:
    """Which server-side executor runs `request` once approved, or "" (plans, and action
    types the agent executes itself). The approving transition records it; the
    execution is published after commit by `approvals.execution` (a `request_changed`
    subscriber), and if the process dies first the sweeper publishes it."""
    return executor_name_for(request.action_type) if request.has_execution_step else ""


def mark_enqueued(request_id: RequestId, *, now: datetime | None = None) -> bool:
    """Note that the execution task was published (bookkeeping for the sweeper, not audited)."""
    return bool(
        ApprovalRequest.objects.filter(pk=request_id, state__in=(State.APPROVED, State.EXECUTING)).update(
            enqueued_at=now or timezone.now()
        )
    )


def release_enqueue(request_id: RequestId) -> bool:
    """Mark a publication whose task was refused (emergency stop) as used up: backdated
    by EXECUTION_REPUBLISH_SECONDS, so the first sweep after the stop is lifted
    publishes it again."""
    stale = timezone.now() - timedelta(seconds=settings.EXECUTION_REPUBLISH_SECONDS)
    return bool(ApprovalRequest.objects.filter(pk=request_id, state=State.APPROVED).update(enqueued_at=stale))
