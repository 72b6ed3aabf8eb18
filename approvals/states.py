"""The approval state machine: states, their labels and colours, and the one
table of legal transitions that services and tests both read.
"""

from __future__ import annotations

from django.db import models


class State(models.TextChoices):
    DRAFT = "draft", "Draft"
    PENDING_APPROVAL = "pending_approval", "Pending approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    EXECUTING = "executing", "Executing"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class RiskLevel(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"
    PROHIBITED = "prohibited", "Prohibited"


class Kind(models.TextChoices):
    ACTION = "action", "Action"
    PLAN = "plan", "Plan"


STATE_COLOURS: dict[str, str] = {
    State.DRAFT: "grey",
    State.PENDING_APPROVAL: "amber",
    State.APPROVED: "green",
    State.REJECTED: "red",
    State.EXPIRED: "grey",
    State.EXECUTING: "blue",
    State.SUCCEEDED: "green",
    State.FAILED: "red",
    State.CANCELLED: "grey",
}

RISK_COLOURS: dict[str, str] = {
    RiskLevel.LOW: "green",
    RiskLevel.MEDIUM: "amber",
    RiskLevel.HIGH: "orange",
    RiskLevel.CRITICAL: "red",
    RiskLevel.PROHIBITED: "black",
}

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
