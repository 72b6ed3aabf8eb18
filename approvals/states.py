"""The approval state machine: states, their labels and colours, and the one
table of legal transitions that services and tests both read.
"""

from __future__ import annotations

from django.db import models


class State(models.TextChoices):
    """A request's state; `colour` is how every page shows it."""

    DRAFT = "draft", "Draft"
    PENDING_APPROVAL = "pending_approval", "Pending approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    EXECUTING = "executing", "Executing"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"

    @property
    def colour(self) -> str:
        return {
            "draft": "grey",
            "pending_approval": "amber",
            "approved": "green",
            "rejected": "red",
            "expired": "grey",
            "executing": "blue",
            "succeeded": "green",
            "failed": "red",
            "cancelled": "grey",
        }[self.value]


class RiskLevel(models.TextChoices):
    """Risk levels in order, least to most restrictive (`rank`), with the colour every page
    shows them in. The order is the rules engine's `policy.rules.levels.LEVELS` (a test
    holds them equal; the engine imports no Django)."""

    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"
    PROHIBITED = "prohibited", "Prohibited"

    @property
    def colour(self) -> str:
        return {"low": "green", "medium": "amber", "high": "orange", "critical": "red", "prohibited": "black"}[
            self.value
        ]

    @property
    def rank(self) -> int:
        return list(RiskLevel).index(self)

    @classmethod
    def most_severe_first(cls) -> list[RiskLevel]:
        """The levels a person can decide, most severe first (queue order, sidebar)."""
        return [level for level in reversed(cls) if level != cls.PROHIBITED]


class Kind(models.TextChoices):
    ACTION = "action", "Action"
    PLAN = "plan", "Plan"
    # A workflow step paused for a typed answer (DESIGN.md "Suspensions"): the
    # reviewer's answer is an object its resume schema describes.
    SUSPENSION = "suspension", "Suspension"


# Colour by value, for templates and code holding plain strings.
STATE_COLOURS: dict[str, str] = {state.value: state.colour for state in State}

# (from, to) -> the audit verb that records that transition. Nothing else is legal.
TRANSITIONS: dict[tuple[str, str], str] = {
    (State.DRAFT, State.PENDING_APPROVAL): "request.queued",
    (State.DRAFT, State.APPROVED): "request.auto_approved",
    (State.DRAFT, State.REJECTED): "request.refused",
    (State.PENDING_APPROVAL, State.APPROVED): "request.approved",
    (State.PENDING_APPROVAL, State.REJECTED): "request.rejected",
    (State.PENDING_APPROVAL, State.EXPIRED): "request.expired",
    (State.PENDING_APPROVAL, State.CANCELLED): "request.cancelled",
    (State.APPROVED, State.CANCELLED): "request.cancelled",
    (State.APPROVED, State.EXECUTING): "request.execution_claimed",
    (State.APPROVED, State.EXPIRED): "request.expired",
    (State.APPROVED, State.FAILED): "request.revalidation_failed",
    (State.EXECUTING, State.SUCCEEDED): "request.succeeded",
    (State.EXECUTING, State.FAILED): "request.failed",
}

# A legal move may instead be recorded under a more specific verb that says why it
# happened; `transition(..., verb=...)` accepts only these. A reply in place of the
# tool ends the request as rejected (nothing runs), but the audit log must tell it
# from a rejection: the agent's model received the reviewer's words as the result.
TRANSITION_VARIANTS: dict[tuple[str, str], frozenset[str]] = {
    (State.PENDING_APPROVAL, State.REJECTED): frozenset({"request.responded"}),
}

ALWAYS_TERMINAL: frozenset[str] = frozenset(
    {State.REJECTED, State.EXPIRED, State.SUCCEEDED, State.FAILED, State.CANCELLED}
)


def is_terminal(state: str, *, has_execution_step: bool) -> bool:
    """Terminal states never change. `approved` is terminal for a request with no
    execution step (a plan the agent implements itself), though the agent may
    still choose to report through claim/complete.
    """
    if state in ALWAYS_TERMINAL:
        return True
    return state == State.APPROVED and not has_execution_step
