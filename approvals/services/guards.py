"""The guards every decision path meets, under the row lock.

Deadlines, the decide permission on the current revision's group, separation of
duties, the emergency stop and the quorum are checked here and nowhere else; the
step-up proof is in `step_up`. Views and API views never check these themselves:
they translate a refusal into HTTP.
"""

from __future__ import annotations

from .. import errors
from ..emergency import is_stopped
from ..errors import DomainError
from ..models import DEFAULT_ALLOWED_DECISIONS, ApprovalRequest, Decision
from ..people import Person
from ..permissions import can_decide, eligible_approvers, excluded_from_approving
from ..states import Kind, State
from .core import SYSTEM, PersistedRefusal, refuse_state, transition
from .step_up import needs_step_up

__all__ = [
    "approvals_counted",
    "expire_if_due",
    "refuse_if_expired",
    "require_may_approve",
    "require_may_decide",
    "require_pending",
    "require_proposed_answer",
    "rule_asks_step_up",
]


def expire_if_due(request: ApprovalRequest) -> str | None:
    """Persist an expiry whose deadline has passed on a locked request; returns its
    code, or None when no deadline has passed."""
    if request.effective_state != State.EXPIRED or request.state == State.EXPIRED:
        return None
    code = errors.DECISION_DEADLINE_PASSED if request.state == State.PENDING_APPROVAL else errors.APPROVAL_EXPIRED
    transition(request, State.EXPIRED, actor=SYSTEM, metadata={"code": code}, resolution_code=code)
    return code


def refuse_if_expired(request: ApprovalRequest) -> None:
    """Raise (after committing the expiry) when a deadline of `request` has passed."""
    code = expire_if_due(request)
    if code is not None:
        raise PersistedRefusal(code, "The deadline passed; the request expired.", state=State.EXPIRED)


def require_pending(request: ApprovalRequest) -> None:
    """The request still awaits decisions: not decided, and its deadline not passed."""
    refuse_if_expired(request)
    if request.state != State.PENDING_APPROVAL:
        raise refuse_state(request, State.PENDING_APPROVAL)


def require_may_decide(request: ApprovalRequest, reviewer: Person) -> None:
    """The reviewer holds decide on the request now (through its current group or an escalation)."""
    if not can_decide(reviewer.user, request):
        raise DomainError(errors.NOT_PERMITTED, "You may not decide this request.")


def require_may_approve(request: ApprovalRequest, reviewer: Person) -> None:
    """Separation of duties, and no approvals while an emergency stop holds the agent."""
    if reviewer.user.pk in excluded_from_approving(request):
        raise DomainError(
            errors.SEPARATION_OF_DUTIES,
            "The person the action is for and the agent's owner cannot approve it.",
        )
    if is_stopped(request.agent):
        raise DomainError(
            errors.EMERGENCY_STOP,
            "An emergency stop is on for this agent: approvals wait until it is lifted. You may still reject.",
            state=request.state,
        )


def require_proposed_answer(request: ApprovalRequest) -> None:
    """A suspension's approval agrees with the answer proposed for its current revision;
    with none proposed there is nothing to agree with (the answer is the decision)."""
    if request.kind == Kind.SUSPENSION and not request.resume_data_json:
        raise DomainError(
            errors.RESUME_DATA_REQUIRED,
            "Nobody has answered this suspension yet: answer it (respond with resume_data) instead of approving.",
        )


def approvals_counted(request: ApprovalRequest) -> int:
    """Distinct people whose approval of the current revision stands: they still hold
    decide, are not excluded from approving, and gave the step-up its level needs."""
    votes = Decision.objects.filter(
        request=request,
        revision=request.current_revision,
        verdict=Decision.Verdict.APPROVE,
        reviewer__in=eligible_approvers(request),
    )
    if needs_step_up(request.risk_level, rule_asks=rule_asks_step_up(request)):
        votes = votes.exclude(step_up_method="")
    return votes.values("reviewer").distinct().count()


def rule_asks_step_up(request: ApprovalRequest) -> bool:
    return bool((request.classification or {}).get("step_up"))


def require_allowed(request: ApprovalRequest, decision: str) -> None:
    """Refuse a decision the agent's host cannot apply (the submission's `allowed_decisions`).

    A reply in place of the tool exists only for actions. Rejecting is never refused
    here: a person can always stop a call (the client tells its host when the host has
    no way to hear it).
    """
    if decision == "respond" and request.kind != Kind.ACTION:
        raise DomainError(
            errors.DECISION_NOT_ALLOWED,
            f"Only an action can be answered in place of its tool, not a {request.kind}.",
            decision=decision,
        )
    if not request.allows(decision):
        allowed = list(request.allowed_decisions or DEFAULT_ALLOWED_DECISIONS)
        raise DomainError(
            errors.DECISION_NOT_ALLOWED,
            f"The agent's host cannot apply {decision!r} to this request; it allows: {', '.join(allowed)}.",
            decision=decision,
            allowed=allowed,
        )
