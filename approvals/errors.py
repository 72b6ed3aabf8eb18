"""The one domain error type. Every refusal carries a stable machine-readable code
that the API turns into HTTP 409 (or the status named here) and clients branch on.
"""

from __future__ import annotations


class DomainError(Exception):
    """A state change was refused; nothing changed.

    `code` is stable and documented (clients and the OpenAPI schema rely on it);
    `message` is for people.
    """

    http_status = 409

    def __init__(self, code: str, message: str, *, http_status: int | None = None, **details: object) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        if http_status is not None:
            self.http_status = http_status

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message, **({"details": self.details} if self.details else {})}

    def __repr__(self) -> str:
        return f"DomainError({self.code!r}, {self.message!r})"


# Codes, in one place so the API schema and the tests can list them.
NOT_FOUND = "not_found"
ILLEGAL_TRANSITION = "illegal_transition"
DECISION_DEADLINE_PASSED = "decision_deadline_passed"
NOT_PERMITTED = "not_permitted"
SEPARATION_OF_DUTIES = "separation_of_duties"
ALREADY_VOTED = "already_voted"
ALREADY_DECIDED = "already_decided"
PARAM_NOT_EDITABLE = "param_not_editable"
EDIT_PROHIBITED = "edit_prohibited"
NO_CHANGES = "no_changes"
REVISION_CHANGED = "revision_changed"
INVALID_EDIT = "invalid_edit"
INVALID_ACTION_TYPE = "invalid_action_type"
# Step-up (services.step_up): deciding at a level that needs a proof of presence.
STEP_UP_REQUIRED = "step_up_required"
STEP_UP_FAILED = "step_up_failed"
SESSION_ENDED = "session_ended"
# Execution
ALREADY_CLAIMED = "already_claimed"
ATTEMPTS_EXHAUSTED = "attempts_exhausted"
INVALID_GRANT = "invalid_grant"
EXECUTED_BY_SERVER = "executed_by_server"
# Re-validation refusals (DESIGN.md "Re-validation").
APPROVAL_EXPIRED = "approval_expired"
TARGET_CHANGED = "target_changed_reapproval_required"
APPROVER_PERMISSION_REVOKED = "approver_permission_revoked"
POLICY_CHANGED = "policy_changed_reapproval_required"
EMERGENCY_STOP = "emergency_stop"
OUTCOME_UNKNOWN = "outcome_unknown"
# Deadline extensions (services.extend_decision_deadline)
EXTENSION_NOT_ALLOWED = "extension_not_allowed"
ALREADY_EXTENDED = "already_extended"

REVALIDATION_CODES = (APPROVAL_EXPIRED, TARGET_CHANGED, APPROVER_PERMISSION_REVOKED, POLICY_CHANGED, EMERGENCY_STOP)
