"""Every state change of an approval request, one function each.

Views, API, consumers, tasks and commands call these and nothing else changes a
request's state. Each function runs in one transaction with the row locked
(`select_for_update`), appends its audit events in that transaction and pushes
the live update only after commit. A refused change raises `DomainError` and
changes nothing, except where a guard must persist what time already decided
(a deadline passed, a re-validation failed): that is committed first, then the
error is raised.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from audit.chain import Actor, audited_atomic, digest, record
from audit.privacy import params_digest, value_digest

from . import broadcast, errors
from .emergency import is_stopped
from .errors import DomainError
from .models import DECIDED_BY_POLICY, ApprovalRequest, Decision, ParamsRevision
from .permissions import (
    can_decide,
    eligible_approver_count,
    eligible_approver_count_of_new_request,
    eligible_approvers,
    excluded_from_approving,
    grant_group,
)
from .policy import current_policy
from .rules.engine import Classification, ClassificationInput
from .rules.impact import compute_impact
from .rules.levels import level_rank
from .snapshots import current_target_hash, snapshot_hash
from .states import TRANSITIONS, Kind, RiskLevel, State

__all__ = [
    "ExecutionGrant",
    "Submission",
    "approve",
    "approve_with_edits",
    "cancel",
    "claim_execution",
    "defer_execution",
    "mark_enqueued",
    "plan_server_execution",
    "reclaim_execution",
    "release_enqueue",
    "classify",
    "complete_execution",
    "expire",
    "escalate_request",
    "expire_overdue",
    "extend_decision_deadline",
    "fail_lost_execution",
    "reject",
    "revalidate",
    "revalidation_refusal",
    "submit",
]

PLAN_ACTION_TYPE = "submit_plan"
SYSTEM = Actor.system()


# --- Inputs and outputs -------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    """What an agent asks for. The API validates shapes and sizes before this."""

    kind: str
    action_type: str = ""
    target: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    declared: dict[str, Any] = field(default_factory=dict)
    plan_path: str = ""
    plan_title: str = ""
    plan_markdown: str = ""
    run_id: str = ""
    thread_id: str = ""
    resource_id: str = ""
    tool_call_id: str = ""
    idempotency_key: str | None = None
    submission_digest: str = ""
    requested_for: Any = None
    supersedes: ApprovalRequest | None = None


@dataclass(frozen=True)
class ExecutionGrant:
    """The single-use right to execute one approved revision, exactly as approved."""

    request_id: str
    token: str
    idempotency_key: str
    params: dict[str, Any]
    lease_until: Any


# --- Helpers --------------------------------------------------------------------


def _lock(request_id) -> ApprovalRequest:
    """Fetch the request with its row locked for the rest of the transaction."""
    try:
        return (
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("agent")
            .get(pk=getattr(request_id, "pk", request_id))
        )
    except ApprovalRequest.DoesNotExist:
        raise DomainError("not_found", "No such approval request.", http_status=404) from None


def _transition(
    request: ApprovalRequest, to: str, *, actor: Actor, metadata: dict | None = None, insert: bool = False, **fields
) -> None:
    """Move `request` to `to`, audit it and push it on commit. Caller holds the lock.

    `insert`: `request` is a draft not written yet (a submission); its row is
    inserted once, already in `to`, instead of inserted as a draft and updated.
    """
    source = request.state
    verb = TRANSITIONS.get((source, to))
    if verb is None:
        raise DomainError(
            errors.ILLEGAL_TRANSITION,
            f"A request that is {source.replace('_', ' ')} cannot become {to.replace('_', ' ')}.",
            state=source,
        )
    request.state = to
    for name, value in fields.items():
        setattr(request, name, value)
    if insert:
        request.save(force_insert=True)
    else:
        request.save(update_fields=["state", *fields])
    record(verb, actor=actor, request=request, metadata={"from": source, "to": to, **(metadata or {})})
    if to == State.PENDING_APPROVAL:
        event = broadcast.CARD_CREATED
    elif source == State.PENDING_APPROVAL:
        event = broadcast.CARD_REMOVED
    else:
        event = broadcast.CARD_UPDATED
    broadcast.publish_on_commit(event, request, new_request=insert, verb=verb)
    if to == State.APPROVED:
        plan_server_execution(request)


def _refuse_state(request: ApprovalRequest, expected: str) -> DomainError:
    if request.decided_by_label and request.state in (State.APPROVED, State.REJECTED):
        return DomainError(
            errors.ALREADY_DECIDED,
            f"Already {request.state} by {request.decided_by_label}.",
            state=request.state,
            decided_by=request.decided_by_label,
        )
    return DomainError(
        errors.ILLEGAL_TRANSITION,
        f"The request is {request.state.replace('_', ' ')}, not {expected.replace('_', ' ')}.",
        state=request.state,
    )


@contextmanager
def _deferred_refusal() -> Iterator[list[DomainError]]:
    """Commit what a guard persisted (an expiry, a failed re-validation), then raise."""
    refusals: list[DomainError] = []
    with audited_atomic():
        yield refusals
    if refusals:
        raise refusals[0]


def _lock_pending(request_id, refusals: list[DomainError]) -> ApprovalRequest | None:
    """Lock a request that must still await decisions.

    A deadline that has passed is persisted as an expiry and its refusal queued
    for `_deferred_refusal` (returns None); any other state is refused at once.
    """
    request = _lock(request_id)
    refusal = _persist_deadline(request)
    if refusal:
        refusals.append(refusal)
        return None
    if request.state != State.PENDING_APPROVAL:
        raise _refuse_state(request, State.PENDING_APPROVAL)
    return request


def _persist_deadline(request: ApprovalRequest) -> DomainError | None:
    """If a deadline has passed, persist the expiry and return the refusal."""
    if request.effective_state != State.EXPIRED or request.state == State.EXPIRED:
        return None
    code = "decision_deadline_passed" if request.state == State.PENDING_APPROVAL else errors.APPROVAL_EXPIRED
    _transition(request, State.EXPIRED, actor=SYSTEM, metadata={"code": code}, resolution_code=code)
    return DomainError(code, "The deadline passed; the request expired.", state=State.EXPIRED)


def _classification_input(request: ApprovalRequest, params: dict[str, Any]) -> ClassificationInput:
    return ClassificationInput(
        action_type=request.action_type,
        params=params,
        target=request.target,
        impact=compute_impact(request.action_type, params, request.target),
        declared=request.declared,
    )


def _stricter_than_request(request: ApprovalRequest, fresh: Classification) -> bool:
    """Would `fresh` demand more than the request was classified (or approved) under?"""
    return level_rank(fresh.risk_level) > level_rank(request.risk_level) or (
        fresh.risk_level != RiskLevel.LOW and fresh.required_approvals > request.required_approvals
    )


def _apply_classification(request: ApprovalRequest, classification: Classification, policy_version_id) -> None:
    request.risk_level = classification.risk_level
    request.rule_name = classification.rule_name or ""
    request.classification = classification.to_dict()
    request.policy_version_id = policy_version_id
    request.required_approvals = max(1, classification.required_approvals)
    rule_id, group_id = _rule_and_group_ids(classification.rule_name, classification.approver_group)
    request.rule_id = rule_id
    # The group row was found by this name, so id and name are all there is to load.
    request.approver_group = None if group_id is None else Group(pk=group_id, name=classification.approver_group)


def _rule_and_group_ids(rule_name: str | None, group_name: str | None) -> tuple[int | None, int | None]:
    """The classifying rule's id and the approver group's id, looked up by name in one
    round trip (both run on every submission). None for a name that has no row."""
    from .models import RiskRule

    if not rule_name and not group_name:
        return None, None
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT {quote('id')} FROM {quote(RiskRule._meta.db_table)} WHERE {quote('name')} = %s LIMIT 1),"
            f" (SELECT {quote('id')} FROM {quote(Group._meta.db_table)} WHERE {quote('name')} = %s LIMIT 1)",
            [rule_name or "", group_name or ""],
        )
        rule_id, group_id = cursor.fetchone()
    return (rule_id if rule_name else None), (group_id if group_name else None)


def _approvals_counted(request: ApprovalRequest) -> int:
    """Distinct eligible people who approved the current revision."""
    return (
        Decision.objects.filter(
            request=request,
            revision=request.current_revision,
            verdict=Decision.Verdict.APPROVE,
            reviewer__in=eligible_approvers(request),
        )
        .values("reviewer")
        .distinct()
        .count()
    )


def _check_quorum_reachable(request: ApprovalRequest, *, eligible: int | None = None) -> None:
    """Say at once when the group cannot reach the quorum, and escalate if the rule names a second group.

    `eligible`: the number of eligible approvers, when the caller counted it already.
    """
    if eligible is None:
        eligible = eligible_approver_count(request)
    if eligible >= request.required_approvals:
        return
    escalation = request.classification.get("escalation_group")
    group = Group.objects.filter(name=escalation).first() if escalation else None
    if group is not None and not request.escalated:
        _escalate(request, group, reason="quorum_unreachable")
        eligible = eligible_approver_count(request)
        if eligible >= request.required_approvals:
            return
    request.quorum_reachable = False
    request.save(update_fields=["quorum_reachable"])
    record(
        "request.quorum_unreachable",
        actor=SYSTEM,
        request=request,
        metadata={"required": request.required_approvals, "eligible": eligible},
    )


def _escalate(request: ApprovalRequest, group: Group, *, reason: str) -> None:
    """Give `group` view and decide on a locked request and audit the escalation."""
    grant_group(request, group)
    request.escalated = True
    request.save(update_fields=["escalated"])
    record("request.escalated", actor=SYSTEM, request=request, metadata={"group": group.name, "reason": reason})
    # The escalation group has never seen this card: for its members it is new.
    broadcast.publish_on_commit(broadcast.CARD_CREATED, request, escalated_to=group.name)


def _check_reviewer(request: ApprovalRequest, reviewer, *, approving: bool) -> None:
    if not can_decide(reviewer, request):
        raise DomainError(errors.NOT_PERMITTED, "You may not decide this request.", http_status=403)
    if approving and reviewer.pk in excluded_from_approving(request):
        raise DomainError(
            errors.SEPARATION_OF_DUTIES,
            "The person the action is for and the agent's owner cannot approve it.",
            http_status=403,
        )


# --- Submission and classification ----------------------------------------------


def submit(submission: Submission, *, agent) -> ApprovalRequest:
    """Create a request from an agent's submission and classify it at once.

    The row is written once, already in the state classification decides (the
    draft exists only in memory), with its first params revision and the
    approver group's permissions; the audit trail is the same as a draft
    inserted and then moved: `request.submitted`, then the transition.

    Raises IntegrityError when the agent already used `idempotency_key`; the API
    replays the first response in that case.
    """
    is_plan = submission.kind == Kind.PLAN
    action_type = PLAN_ACTION_TYPE if is_plan else submission.action_type
    request = ApprovalRequest(
        kind=submission.kind,
        agent=agent,
        requested_for=submission.requested_for,
        action_type=action_type,
        target=submission.target,
        target_hash=snapshot_hash(action_type, submission.target),
        declared=submission.declared,
        has_execution_step=not is_plan,
        plan_path=submission.plan_path,
        plan_title=submission.plan_title,
        plan_markdown=submission.plan_markdown,
        run_id=submission.run_id,
        thread_id=submission.thread_id,
        resource_id=submission.resource_id,
        tool_call_id=submission.tool_call_id,
        idempotency_key=submission.idempotency_key,
        submission_digest=submission.submission_digest,
        supersedes=submission.supersedes,
    )
    with audited_atomic():
        record(
            "request.submitted",
            actor=Actor.for_agent(agent),
            request=request,
            metadata={
                "kind": request.kind,
                "action_type": action_type,
                "params": params_digest(action_type, submission.params),
                "target_hash": request.target_hash,
                **({"plan": digest(submission.plan_markdown), "plan_path": submission.plan_path} if is_plan else {}),
                **({"supersedes": str(submission.supersedes.pk)} if submission.supersedes else {}),
            },
        )
        classify(request, params=submission.params)
    return request


def classify(request: ApprovalRequest, *, params: dict[str, Any]) -> None:
    """Decide a new draft's fate under the current policy: auto-approve, queue or refuse.

    `request` is a draft not written yet (`submit` builds it); this inserts it in
    the state decided, with revision 1 of `params`.

    The model never decides its own risk: impact is computed here and declared
    facts reach only rules that trust them. During an emergency stop nothing
    auto-approves; low-risk requests queue for people instead.
    """
    active = current_policy()
    inp = _classification_input(request, params)
    classification = active.compiled.classify(inp)
    request.impact = inp.impact
    _apply_classification(request, classification, active.version_id)
    now = timezone.now()
    why = {"risk_level": classification.risk_level, "rule": classification.rule_name,
           "policy_version": active.compiled.version, "reason": classification.reason}

    if classification.risk_level == RiskLevel.PROHIBITED:
        _transition(
            request, State.REJECTED, actor=SYSTEM, metadata=why, insert=True,
            resolution_code="prohibited_by_policy", decided_at=now, decided_by_label=DECIDED_BY_POLICY,
            feedback=f"Refused by policy: {classification.reason}",
        )
        _first_revision(request, params, classification)
        return
    if classification.risk_level == RiskLevel.LOW and not is_stopped(request.agent):
        _transition(
            request, State.APPROVED, actor=SYSTEM, metadata=why, insert=True,
            resolution_code="auto_approved", decided_at=now, decided_by_label=DECIDED_BY_POLICY,
            execute_by=now + timedelta(seconds=classification.execution_window_seconds),
        )
        _first_revision(request, params, classification)
        return
    if classification.risk_level == RiskLevel.LOW:
        why["emergency_stop"] = True
    _transition(
        request, State.PENDING_APPROVAL, actor=SYSTEM, metadata=why, insert=True,
        decide_by=now + timedelta(seconds=classification.decision_ttl_seconds),
    )
    _first_revision(request, params, classification)
    _check_quorum_reachable(request, eligible=eligible_approver_count_of_new_request(request))


def _first_revision(request: ApprovalRequest, params: dict[str, Any], classification: Classification) -> None:
    """Revision 1 of a just-inserted request, and view + decide for its approver group
    (a refused request gets no approvers)."""
    ParamsRevision.objects.create(request=request, number=1, params=params, risk_level=classification.risk_level)
    if request.approver_group is not None and classification.risk_level != RiskLevel.PROHIBITED:
        grant_group(request, request.approver_group)


# --- Decisions --------------------------------------------------------------------


def _record_vote(request: ApprovalRequest, reviewer, verdict: str, feedback: str) -> None:
    if Decision.objects.filter(request=request, revision=request.current_revision, reviewer=reviewer).exists():
        raise DomainError(errors.ALREADY_VOTED, "You already decided this revision.")
    Decision.objects.create(
        request=request, revision=request.current_revision, reviewer=reviewer, verdict=verdict, feedback=feedback
    )
    record(
        "decision.recorded",
        actor=Actor.for_user(reviewer),
        request=request,
        metadata={"revision": request.current_revision, "verdict": verdict, "feedback": digest(feedback)},
    )


def _approve_if_quorum(request: ApprovalRequest, reviewer) -> None:
    counted = _approvals_counted(request)
    if counted < request.required_approvals:
        broadcast.publish_on_commit(
            broadcast.CARD_UPDATED, request, approvals=counted, required=request.required_approvals
        )
        return
    now = timezone.now()
    window = request.classification.get("execution_window_seconds", settings.DEFAULT_EXECUTION_WINDOW_SECONDS)
    _transition(
        request, State.APPROVED, actor=Actor.for_user(reviewer),
        metadata={"revision": request.current_revision, "approvals": counted},
        decided_at=now, decided_by_label=reviewer.get_username(), resolution_code="approved",
        execute_by=now + timedelta(seconds=window),
    )


def approve(request_id, *, reviewer, feedback: str = "") -> ApprovalRequest:
    """Record `reviewer`'s approval of the current revision; approve once the quorum stands."""
    with _deferred_refusal() as refusals:
        request = _lock_pending(request_id, refusals)
        if request is None:
            return None  # type: ignore[return-value]  (the deferred refusal raises)
        _check_reviewer(request, reviewer, approving=True)
        _record_vote(request, reviewer, Decision.Verdict.APPROVE, feedback)
        _approve_if_quorum(request, reviewer)
    return request


def reject(request_id, *, reviewer, feedback: str = "") -> ApprovalRequest:
    """Any eligible reviewer's rejection ends the request; `feedback` reaches the agent verbatim."""
    with _deferred_refusal() as refusals:
        request = _lock_pending(request_id, refusals)
        if request is None:
            return None  # type: ignore[return-value]  (the deferred refusal raises)
        _check_reviewer(request, reviewer, approving=False)
        _record_vote(request, reviewer, Decision.Verdict.REJECT, feedback)
        _transition(
            request, State.REJECTED, actor=Actor.for_user(reviewer),
            metadata={"revision": request.current_revision, "feedback": digest(feedback)},
            decided_at=timezone.now(), decided_by_label=reviewer.get_username(),
            resolution_code="rejected", feedback=feedback,
        )
    return request


def approve_with_edits(request_id, *, reviewer, edits: dict[str, Any], feedback: str = "") -> ApprovalRequest:
    """Approve a new revision with `edits` applied to the params the rule marks editable.

    The new revision is re-classified; approvals of earlier revisions stop counting
    and the editor's approval counts for the new one. An edit that policy would
    refuse outright is itself refused.
    """
    with _deferred_refusal() as refusals:
        request = _lock_pending(request_id, refusals)
        if request is None:
            return None  # type: ignore[return-value]  (the deferred refusal raises)
        _check_reviewer(request, reviewer, approving=True)
        editable = set(request.classification.get("editable_params", ()))
        not_editable = sorted(set(edits) - editable)
        if not_editable:
            raise DomainError(
                errors.PARAM_NOT_EDITABLE,
                f"Not editable under rule {request.rule_name or 'default'}: {', '.join(not_editable)}.",
                http_status=422,
                fields=not_editable,
            )
        previous = request.current_params()
        params = {**previous, **edits}
        changed = sorted(key for key in edits if previous.get(key, object()) != edits[key])
        if not changed:
            raise DomainError("no_changes", "The edits change nothing; approve instead.", http_status=422)

        active = current_policy()
        inp = _classification_input(request, params)
        classification = active.compiled.classify(inp)
        if classification.risk_level == RiskLevel.PROHIBITED:
            raise DomainError(errors.EDIT_PROHIBITED, f"Policy refuses the edited call: {classification.reason}",
                              http_status=422)
        # Edits may widen the call; the request never drops below the scrutiny it had.
        stricter = _stricter_than_request(request, classification)
        request.current_revision = F("current_revision") + 1
        request.save(update_fields=["current_revision"])
        request.refresh_from_db(fields=["current_revision"])
        ParamsRevision.objects.create(
            request=request, number=request.current_revision, params=params, created_by=reviewer,
            changed_keys=changed, risk_level=classification.risk_level,
        )
        request.impact = inp.impact
        if stricter:
            _apply_classification(request, classification, active.version_id)
            if request.approver_group is not None:
                grant_group(request, request.approver_group)
        request.save()
        record(
            "request.revised",
            actor=Actor.for_user(reviewer),
            request=request,
            metadata={
                "revision": request.current_revision,
                "changed": {
                    key: {"before": value_digest(request.action_type, key, previous.get(key)),
                          "after": value_digest(request.action_type, key, edits[key])}
                    for key in changed
                },
                "risk_level": classification.risk_level,
                "reclassified": stricter,
            },
        )
        _record_vote(request, reviewer, Decision.Verdict.APPROVE, feedback)
        _approve_if_quorum(request, reviewer)
    return request


def cancel(request_id, *, agent=None, acting_user=None, reason: str = "") -> ApprovalRequest:
    """The agent withdraws its request, or an admin revokes it, before execution."""
    with _deferred_refusal() as refusals:
        request = _lock(request_id)
        if agent is not None and request.agent_id != agent.pk:
            raise DomainError("not_found", "No such approval request.", http_status=404)
        actor = Actor.for_agent(agent) if agent is not None else Actor.for_user(acting_user)
        refusal = _persist_deadline(request)
        if refusal:
            refusals.append(refusal)
            return request
        if request.state not in (State.PENDING_APPROVAL, State.APPROVED):
            raise _refuse_state(request, "pending approval or approved")
        _transition(
            request, State.CANCELLED, actor=actor, metadata={"reason": digest(reason)},
            resolution_code="withdrawn" if agent is not None else "revoked", feedback=reason,
            decided_at=request.decided_at or timezone.now(),
        )
    return request


# --- Deadlines ----------------------------------------------------------------------


def expire(request_id) -> bool:
    """Persist an expiry whose deadline has passed; False when nothing was due."""
    with audited_atomic():
        request = _lock(request_id)
        return _persist_deadline(request) is not None


def expire_overdue(*, now=None, limit: int = 500) -> int:
    """The sweeper's entry point: expire what is overdue, one short transaction each."""
    now = now or timezone.now()
    overdue = list(
        ApprovalRequest.objects.overdue_for_decision(now).values_list("pk", flat=True)[:limit]
    ) + list(ApprovalRequest.objects.overdue_for_execution(now).values_list("pk", flat=True)[:limit])
    return sum(expire(pk) for pk in overdue)


# --- Re-validation and execution -------------------------------------------------------


def revalidation_refusal(request: ApprovalRequest, *, target_hash: str | None = None) -> tuple[str, str] | None:
    """Why `request` may not execute now, as (code, message), or None. Writes nothing.

    The one re-validation every execution path uses (through `revalidate`).
    """
    if is_stopped(request.agent):
        return errors.EMERGENCY_STOP, "The emergency stop is on; execution waits until it is lifted."
    if request.has_execution_step and request.execute_by and request.execute_by <= timezone.now():
        return errors.APPROVAL_EXPIRED, "The approval's execution window has passed."
    fresh = current_target_hash(request.action_type, request.target) or target_hash
    if fresh and fresh != request.target_hash:
        return errors.TARGET_CHANGED, "The target changed since it was approved; submit it again for approval."
    if not request.approved_by_policy and _approvals_counted(request) < request.required_approvals:
        return errors.APPROVER_PERMISSION_REVOKED, "An approver no longer holds the permission; the quorum no longer stands."
    fresh_classification = current_policy().compiled.classify(_classification_input(request, request.current_params()))
    if _stricter_than_request(request, fresh_classification):
        return (
            errors.POLICY_CHANGED,
            f"The current policy is stricter for this call ({fresh_classification.reason}); it needs approval again.",
        )
    return None


def revalidate(request: ApprovalRequest, *, actor: Actor, target_hash: str | None = None) -> DomainError | None:
    """Re-validate a locked, approved request right before execution.

    On refusal the request moves to `expired` or `failed` with the reason code,
    audited, and the error is returned for the caller to raise after commit. An
    emergency stop refuses without changing anything: the request runs once the
    stop is lifted. A refused request is never re-opened; the agent resubmits.
    """
    refusal = revalidation_refusal(request, target_hash=target_hash)
    if refusal is None:
        return None
    code, message = refusal
    if code == errors.APPROVAL_EXPIRED:
        _transition(request, State.EXPIRED, actor=actor, metadata={"code": code}, resolution_code=code)
    elif code != errors.EMERGENCY_STOP:
        _transition(
            request, State.FAILED, actor=actor, metadata={"code": code},
            resolution_code=code, error=message, finished_at=timezone.now(),
        )
    return DomainError(code, message, state=request.state)


def _grant_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def claim_execution(request_id, *, actor: Actor, agent=None, target_hash: str | None = None) -> ExecutionGrant:
    """Re-validate and claim an approved request for execution: exactly one caller wins.

    Returns the single-use grant with the exact approved params and the
    idempotency key the side effect must carry.
    """
    with _deferred_refusal() as refusals:
        request = _lock(request_id)
        if agent is not None and request.agent_id != agent.pk:
            raise DomainError("not_found", "No such approval request.", http_status=404)
        if agent is not None and request.executor:
            raise DomainError(
                errors.EXECUTED_BY_SERVER,
                f"The server runs this request (executor {request.executor!r}); wait for its result instead.",
                state=request.state,
            )
        if request.state != State.APPROVED:
            raise DomainError(
                "already_claimed" if request.state == State.EXECUTING else errors.ILLEGAL_TRANSITION,
                f"The request is {request.state.replace('_', ' ')}; only an approved request can be claimed.",
                state=request.state,
            )
        refusal = revalidate(request, actor=actor, target_hash=target_hash)
        if refusal:
            refusals.append(refusal)
            return None  # type: ignore[return-value]  (the context manager raises)
        token = secrets.token_urlsafe(32)
        lease_until = timezone.now() + timedelta(seconds=settings.EXECUTION_LEASE_SECONDS)
        # The row is locked already; the conditional update is what makes a second
        # claimant (even one that skipped the lock) change nothing.
        won = ApprovalRequest.objects.filter(pk=request.pk, state=State.APPROVED).update(
            state=State.EXECUTING, grant_hash=_grant_hash(token), lease_until=lease_until,
            attempts=F("attempts") + 1,
        )
        if won != 1:
            raise DomainError("already_claimed", "Another executor claimed this request first.")
        source = request.state
        request.refresh_from_db()
        record(
            "request.execution_claimed", actor=actor, request=request,
            metadata={"from": source, "to": State.EXECUTING, "attempt": request.attempts,
                      "idempotency_key": request.execution_key},
        )
        broadcast.publish_on_commit(broadcast.CARD_UPDATED, request, verb="request.execution_claimed")
        grant = ExecutionGrant(
            request_id=str(request.pk), token=token, idempotency_key=request.execution_key,
            params=request.current_params(), lease_until=lease_until,
        )
    return grant


def complete_execution(
    request_id, *, token: str, succeeded: bool, actor: Actor, result: Any = None, error: str = "", code: str = ""
) -> ApprovalRequest:
    """Record the executor's outcome for the claim that `token` proves.

    `code` names why a failure failed (e.g. ``outcome_unknown``); it defaults to
    ``execution_failed`` and is ignored on success.
    """
    with audited_atomic():
        request = _lock(request_id)
        if request.state != State.EXECUTING:
            raise _refuse_state(request, State.EXECUTING)
        if not hmac.compare_digest(request.grant_hash, _grant_hash(token)):
            raise DomainError(errors.INVALID_GRANT, "That execution grant is not valid for this request.", http_status=403)
        _transition(
            request, State.SUCCEEDED if succeeded else State.FAILED, actor=actor,
            metadata={"result": digest(result), **({"error": digest(error)} if error else {})},
            result=result, error=error, finished_at=timezone.now(), grant_hash="",
            resolution_code="succeeded" if succeeded else (code or "execution_failed"),
        )
    return request


def fail_lost_execution(request_id) -> bool:
    """An executing request whose lease ran out with no report: its outcome is unknown."""
    with audited_atomic():
        request = _lock(request_id)
        if request.state != State.EXECUTING or not request.lease_until or request.lease_until > timezone.now():
            return False
        _transition(
            request, State.FAILED, actor=SYSTEM, metadata={"code": errors.OUTCOME_UNKNOWN},
            resolution_code=errors.OUTCOME_UNKNOWN, error="The execution lease ran out with no result.",
            finished_at=timezone.now(), grant_hash="",
        )
    return True


# --- Server-side execution: enqueue, retries and leases (execution engine) -------------
#
# A request whose action type has a server-side executor (approvals.executors) is
# published to Celery after the approving transaction commits; the worker claims it
# with `claim_execution` like any executor. The database, not the broker, carries
# retries: a retryable failure releases the grant and sets `next_attempt_at`
# (`defer_execution`); the sweeper re-publishes due rows and `reclaim_execution`
# takes a fresh grant under the same idempotency key.


def plan_server_execution(request: ApprovalRequest) -> None:
    """Inside an approving transaction: record the executor and publish after commit.

    No-op for plans and for action types the agent executes itself. If the
    process dies between commit and publish, `enqueued_at` stays empty and the
    sweeper publishes it.
    """
    from .executors import executor_name_for

    if not request.has_execution_step:
        return
    name = executor_name_for(request.action_type)
    if not name:
        return
    request.executor = name
    request.save(update_fields=["executor"])
    request_id = str(request.pk)

    def publish() -> None:
        from .executors.runner import enqueue

        enqueue(request_id)

    transaction.on_commit(publish)


def mark_enqueued(request_id, *, now=None) -> bool:
    """Note that the execution task was published (bookkeeping for the sweeper, not audited)."""
    return bool(
        ApprovalRequest.objects.filter(pk=request_id, state__in=(State.APPROVED, State.EXECUTING)).update(
            enqueued_at=now or timezone.now()
        )
    )


def release_enqueue(request_id) -> bool:
    """Mark a publication whose task was refused (emergency stop) as used up: backdated
    by EXECUTION_REPUBLISH_SECONDS, so the first sweep after the stop is lifted
    publishes it again."""
    stale = timezone.now() - timedelta(seconds=settings.EXECUTION_REPUBLISH_SECONDS)
    return bool(ApprovalRequest.objects.filter(pk=request_id, state=State.APPROVED).update(enqueued_at=stale))


def defer_execution(request_id, *, token: str, actor: Actor, error: str, code: str, retry_at) -> ApprovalRequest:
    """A retryable failure: give the grant back and schedule the next attempt.

    The request stays `executing` (its claim stands; the idempotency key is the
    same on every attempt) with no valid grant until `reclaim_execution`.
    """
    with audited_atomic():
        request = _lock(request_id)
        if request.state != State.EXECUTING:
            raise _refuse_state(request, State.EXECUTING)
        if not request.grant_hash or not hmac.compare_digest(request.grant_hash, _grant_hash(token)):
            raise DomainError(errors.INVALID_GRANT, "That execution grant is not valid for this request.", http_status=403)
        request.grant_hash = ""
        request.lease_until = retry_at
        request.next_attempt_at = retry_at
        request.error = error
        request.save(update_fields=["grant_hash", "lease_until", "next_attempt_at", "error"])
        record(
            "request.execution_deferred", actor=actor, request=request,
            metadata={"attempt": request.attempts, "code": code, "error": digest(error),
                      "retry_at": retry_at.isoformat()},
        )
        broadcast.publish_on_commit(broadcast.CARD_UPDATED, request, verb="request.execution_deferred")
    return request


def reclaim_execution(request_id, *, actor: Actor, idempotent: bool, max_attempts: int | None = None) -> ExecutionGrant:
    """Take a fresh grant on an `executing` request whose next attempt is due.

    Due means: a deferred retry whose `next_attempt_at` has come, or (only when the
    executor is `idempotent`) a claim whose lease ran out with no report. The
    same re-validation as a first claim runs first: an emergency stop refuses and
    changes nothing; any other refusal fails the request with its code. After
    `max_attempts` claims a lost lease fails with ``outcome_unknown``.
    """
    max_attempts = max_attempts or settings.EXECUTION_MAX_ATTEMPTS
    with _deferred_refusal() as refusals:
        request = _lock(request_id)
        now = timezone.now()
        if request.state != State.EXECUTING:
            raise _refuse_state(request, State.EXECUTING)
        deferred = not request.grant_hash
        if not request.lease_until or request.lease_until > now or not (deferred or idempotent):
            raise DomainError("already_claimed", "The execution is running or not due for another attempt.",
                              state=request.state)
        if request.attempts >= max_attempts:
            _transition(
                request, State.FAILED, actor=actor,
                metadata={"code": errors.OUTCOME_UNKNOWN if not deferred else "attempts_exhausted",
                          "attempts": request.attempts},
                resolution_code=errors.OUTCOME_UNKNOWN if not deferred else "attempts_exhausted",
                error=f"Gave up after {request.attempts} attempts. {request.error}".strip(),
                finished_at=now, grant_hash="",
            )
            refusals.append(DomainError("attempts_exhausted", "No attempts left.", state=request.state))
            return None  # type: ignore[return-value]  (the context manager raises)
        refusal = revalidation_refusal(request)
        if refusal is not None:
            code, message = refusal
            if code != errors.EMERGENCY_STOP:
                _transition(
                    request, State.FAILED, actor=actor, metadata={"code": code},
                    resolution_code=code, error=message, finished_at=now, grant_hash="",
                )
            refusals.append(DomainError(code, message, state=request.state))
            return None  # type: ignore[return-value]
        token = secrets.token_urlsafe(32)
        request.grant_hash = _grant_hash(token)
        request.lease_until = now + timedelta(seconds=settings.EXECUTION_LEASE_SECONDS)
        request.next_attempt_at = None
        request.attempts = request.attempts + 1
        request.save(update_fields=["grant_hash", "lease_until", "next_attempt_at", "attempts"])
        record(
            "request.execution_reclaimed", actor=actor, request=request,
            metadata={"attempt": request.attempts, "idempotency_key": request.execution_key,
                      "reason": "retry" if deferred else "lease_lost"},
        )
        broadcast.publish_on_commit(broadcast.CARD_UPDATED, request, verb="request.execution_reclaimed")
        grant = ExecutionGrant(
            request_id=str(request.pk), token=token, idempotency_key=request.execution_key,
            params=request.current_params(), lease_until=request.lease_until,
        )
    return grant


# --- Notifications and escalation (risk-rule tuning: approvals/notifications) -----------
#
# Escalation after a rule's set time undecided, and a reviewer's one-time extension
# of decide_by within the rule's limit (RuleNotification). The beat entry points in
# approvals.notifications.dispatch call these; emails and webhooks go out after commit.


def escalate_request(request_id, *, group: Group, reason: str) -> bool:
    """Escalate a pending request to `group` (view and decide); False if it is no
    longer pending or was escalated before. A deadline that passed is persisted
    (the request expires) and False is returned."""
    with audited_atomic():
        request = _lock(request_id)
        if _persist_deadline(request) is not None:
            return False
        if request.state != State.PENDING_APPROVAL or request.escalated:
            return False
        _escalate(request, group, reason=reason)
        broadcast.publish_on_commit(broadcast.CARD_UPDATED, request, verb="request.escalated", group=group.name)
    return True


def extend_decision_deadline(request_id, *, reviewer, seconds: int, reason: str = "") -> ApprovalRequest:
    """Push a pending request's `decide_by` back by `seconds`, once per request,
    within its rule's `max_extension_seconds` (approvals.models.RuleNotification).

    Only someone who may decide the request may extend it. Raises DomainError:
    ``not_permitted`` (403), ``extension_not_allowed`` (the rule allows none, or
    `seconds` is outside 1..limit; 422), ``already_extended`` (409), or the usual
    state refusals; a deadline already passed is persisted as an expiry first.
    """
    from .models import DeadlineExtension, RuleNotification

    with _deferred_refusal() as refusals:
        request = _lock_pending(request_id, refusals)
        if request is None:
            return None  # type: ignore[return-value]  (the deferred refusal raises)
        _check_reviewer(request, reviewer, approving=False)
        limit = (
            RuleNotification.objects.filter(rule_name=request.rule_name).values_list("max_extension_seconds", flat=True)
            .first() if request.rule_name else None
        ) or 0
        if limit <= 0:
            raise DomainError(errors.EXTENSION_NOT_ALLOWED, "This request's rule allows no deadline extension.",
                              http_status=422)
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= limit:
            raise DomainError(errors.EXTENSION_NOT_ALLOWED,
                              f"An extension must be between 1 and {limit} seconds.", http_status=422, limit=limit)
        if DeadlineExtension.objects.filter(request=request).exists():
            raise DomainError(errors.ALREADY_EXTENDED, "The deadline of this request was already extended once.")
        previous = request.decide_by
        request.decide_by = previous + timedelta(seconds=seconds)
        request.save(update_fields=["decide_by"])
        DeadlineExtension.objects.create(
            request=request, extended_by=reviewer, extended_by_label=reviewer.get_username(),
            previous_decide_by=previous, new_decide_by=request.decide_by, reason=reason,
        )
        record(
            "request.deadline_extended", actor=Actor.for_user(reviewer), request=request,
            metadata={"from": previous.isoformat(), "to": request.decide_by.isoformat(), "seconds": seconds,
                      "reason": digest(reason)},
        )
        broadcast.publish_on_commit(broadcast.CARD_UPDATED, request, verb="request.deadline_extended",
                                    decide_by=request.decide_by.isoformat())
    return request
