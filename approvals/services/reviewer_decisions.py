"""People's decisions: approve, reject, batches, and withdrawal (approve with edits is in
`edits`, re-exported here; the vote every decision records is in `votes`).

Every path a person decides through (dashboard form, keyboard, JSON API, and any
later channel) calls these functions, which check every guard under the row lock
(`guards`, `step_up`); callers only translate a `DomainError` into their medium.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils import timezone

from audit.chain import Actor, digest

from .. import errors
from ..errors import DomainError
from ..models import ApprovalRequest
from ..people import Person
from ..states import State
from .core import RequestId, changing, refuse_state, transition
from .edits import APPROVE_WITH_EDITS, approve_with_edits, edit_decision, is_proposal
from .guards import (
    refuse_if_expired,
    require_allowed,
    require_may_approve,
    require_may_decide,
    require_pending,
    require_proposed_answer,
    rule_asks_step_up,
)
from .step_up import require_step_up
from .votes import (
    APPROVE,
    REJECT,
    _approve_if_quorum,
    _record_vote,
    _require_bounded_input,
    _require_revision,
    require_revision_given,
)

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = [
    "APPROVE_WITH_EDITS",
    "BatchItem",
    "approve",
    "approve_with_edits",
    "cancel",
    "decide_batch",
    "edit_decision",
    "is_proposal",
    "reject",
    "require_revision_given",
]


def approve(request_id: RequestId, *, actor: Person, revision: int | None, feedback: str = "") -> ApprovalRequest:
    """Record `actor`'s approval of the current revision; approve once the quorum stands.

    `revision`: the revision the reviewer looked at (required: 422 `revision_required`
    without one); if the request moved on since, nothing is recorded (`revision_changed`).
    """
    revision = require_revision_given(revision)
    _require_bounded_input(feedback)
    with changing(request_id) as request:
        require_pending(request)
        _require_revision(request, revision)
        require_may_decide(request, actor)
        require_allowed(request, "approve")
        require_may_approve(request, actor)
        require_proposed_answer(request)
        method = require_step_up(
            request,
            actor,
            decision=(str(request.pk), request.current_revision, APPROVE, ""),
            risk_level=request.risk_level,
            rule_asks=rule_asks_step_up(request),
        )
        _record_vote(request, actor, APPROVE, feedback, step_up_method=method)
        _approve_if_quorum(request, actor)
    return request


def reject(request_id: RequestId, *, actor: Person, revision: int | None, feedback: str = "") -> ApprovalRequest:
    """Any reviewer who may decide ends the request; `feedback` reaches the agent verbatim.

    A rejection needs no step-up and is open to the agent's owner and the person it
    acts for: it can only stop something, never make it run.
    """
    revision = require_revision_given(revision)
    _require_bounded_input(feedback)
    with changing(request_id) as request:
        require_pending(request)
        _require_revision(request, revision)
        require_may_decide(request, actor)
        _record_vote(request, actor, REJECT, feedback)
        transition(
            request,
            State.REJECTED,
            actor=actor,
            metadata={"revision": request.current_revision, "feedback": digest(feedback)},
            decided_at=timezone.now(),
            decided_by_label=actor.label,
            resolution_code="rejected",
            feedback=feedback,
        )
    return request


@dataclass(frozen=True)
class BatchItem:
    """One request of a batch decision: what was decided, or why it was refused."""

    request_id: str
    request: ApprovalRequest | None = None
    error: DomainError | None = None


def decide_batch(
    items: Sequence[tuple[str, int | None]], *, actor: Person, verdict: str, feedback: str = ""
) -> list[BatchItem]:
    """Approve or reject several requests at once, each exactly at the revision the
    reviewer saw, each in its own transaction with every guard of a single decision.

    A step-up proof for the batch must cover every (request, revision, verdict) in
    it (`StepUpProof(..., covers=...)`): one proof, one digest, valid for these
    decisions only. A member without a revision refuses the whole batch (422
    `revision_required`, nothing decided). A request whose revision moved on is refused with
    `revision_changed`; the others are decided on their own.
    """
    decide = approve if verdict == APPROVE else reject if verdict == REJECT else None
    if decide is None:
        raise DomainError(errors.INVALID_EDIT, f"Unknown verdict {verdict!r}.")
    for _request_id, revision in items:  # every member names its revision, or none is decided
        require_revision_given(revision)
    _require_bounded_input(feedback)
    results = []
    for request_id, revision in items:
        try:
            decided = decide(request_id, actor=actor, feedback=feedback, revision=revision)
            results.append(BatchItem(str(request_id), request=decided))
        except DomainError as error:
            results.append(BatchItem(str(request_id), error=error))
            if error.code == errors.SESSION_ENDED:
                break
    return results


def cancel(request_id: RequestId, *, actor: Actor, agent: Agent | None = None, reason: str = "") -> ApprovalRequest:
    """The agent withdraws its request, or an admin revokes it, before execution.

    `agent`: the request must be this agent's (another's reads as missing).
    """
    with changing(request_id, agent=agent) as request:
        refuse_if_expired(request)
        if request.state not in (State.PENDING_APPROVAL, State.APPROVED):
            raise refuse_state(request, "pending approval or approved")
        transition(
            request,
            State.CANCELLED,
            actor=actor,
            metadata={"reason": digest(reason)},
            resolution_code="withdrawn" if agent is not None else "revoked",
            feedback=reason,
            decided_at=request.decided_at or timezone.now(),
        )
    return request
