"""The one result shape every surface renders, for `approvals.decide` (which re-exports these
names): `Decided` for one decision, `BatchDecided` with one `ItemResult` per request of a batch,
and the sentence a reviewer reads for each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import errors, services
from .decide_inputs import APPROVE, EDIT, REJECT, RESPOND, Batch, Decision
from .errors import DomainError
from .states import Kind, State


@dataclass(frozen=True)
class Decided:
    """A decision the services recorded: the request as it is now, and what that means."""

    decision: Decision
    request: Any  # ApprovalRequest
    proposal: bool  # an edit or answer that stands as a proposal others decide

    @property
    def outcome(self) -> str:
        """approved, rejected, ..., or while pending: vote_recorded, edit_proposed or answer_proposed."""
        if self.request.state != State.PENDING_APPROVAL:
            return self.request.state
        if self.proposal:
            return "answer_proposed" if self.request.kind == Kind.SUSPENSION else "edit_proposed"
        return "vote_recorded"

    @property
    def message(self) -> str:
        """The sentence a reviewer reads."""
        decided, verdict = self.request, self.decision.verdict
        if verdict == RESPOND and not self.decision.answers_a_suspension:
            return f"{request_label(decided)}: your reply went to the agent instead of running the tool."
        if verdict == RESPOND:
            if self.proposal:
                return (
                    "Your answer is saved as a proposal: your approval does not count for it, "
                    "the other approvers must agree."
                )
            return decided_message(decided, "answer")
        if verdict == EDIT:
            changed = ", ".join(sorted(self.decision.edits))
            if self.proposal:
                group = decided.approver_group.name if decided.approver_group_id else "its approvers"
                return (
                    f"Your edit to {changed} is saved as a proposal: {group} must approve it "
                    f"({decided.required_approvals} needed), and your approval does not count for it."
                )
            return f"Approved with edits to {changed}. " + decided_message(decided, "approval")
        return decided_message(decided, "rejection" if verdict == REJECT else "approval")


def decided_message(request_obj, verb: str) -> str:
    if request_obj.state == State.PENDING_APPROVAL:
        return (
            f"Your {verb} is recorded: {request_obj.required_approvals} approvals are needed, waiting for the others."
        )
    outcome = request_obj.get_state_display().lower()
    if request_obj.kind == Kind.SUSPENSION and request_obj.state == State.APPROVED:
        outcome = "answered: the workflow can resume"
    return f"{request_label(request_obj)} {outcome}."


def request_label(request_obj) -> str:
    """How a reviewer's sentence names a request: its action type, or for a plan and a
    suspension their title (their action types, such as submit_plan, are internal)."""
    if request_obj.kind == Kind.PLAN:
        return f"Plan “{request_obj.plan_title or request_obj.plan_path or 'untitled'}”"
    if request_obj.kind == Kind.SUSPENSION:
        return f"“{request_obj.plan_title or request_obj.workflow_id or 'The paused step'}”"
    return request_obj.action_type


@dataclass(frozen=True)
class ItemResult:
    """One request of a batch: decided (`decided`), refused (`error`), or not in the
    surface's scope (`missing`: answered like a request that does not exist)."""

    request_id: str
    decided: Decided | None = None
    error: DomainError | None = None

    @property
    def missing(self) -> bool:
        return self.decided is None and self.error is None

    @property
    def ok(self) -> bool:
        return self.decided is not None


@dataclass(frozen=True)
class BatchDecided:
    batch: Batch
    results: list[ItemResult]  # in the batch's order

    @property
    def digest(self) -> str:
        return services.decision_digest(self.batch.confirmed())

    @property
    def message(self) -> str:
        done = sum(result.ok for result in self.results)
        refused = len(self.results) - done
        return f"{done} of {len(self.results)} {'approved' if self.batch.verdict == APPROVE else 'rejected'}" + (
            f"; {refused} refused (see each)." if refused else "."
        )

    @property
    def ended_the_session(self) -> bool:
        return any(result.error is not None and result.error.code == errors.SESSION_ENDED for result in self.results)
