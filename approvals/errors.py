"""The domain's refusals: one error type and the registered codes it carries.

Every refusal has a stable machine-readable code (registered with its HTTP status
in `controlplane.http.codes`, so the API, the pages' scripts and the OpenAPI
schema read one table) and a message for people.
"""

from __future__ import annotations

from controlplane.http.codes import NOT_FOUND, register
from controlplane.http.errors import CodedError

__all__ = ["DomainError", "NOT_FOUND", "no_such_request"]


class DomainError(CodedError):
    """A state change was refused; nothing changed (or, for a `PersistedRefusal`,
    only what time or a check already decided)."""


def no_such_request() -> DomainError:
    """404 `not_found` for a request that does not exist or is not the caller's to see.

    Every surface (the agents' API and long-poll, the reviewers' API, the pages, the
    services) answers both cases with this one error, so no caller can tell another's
    request from a missing one.
    """
    return DomainError(NOT_FOUND, "No such approval request.")


# --- Transitions and decisions -------------------------------------------------------
ILLEGAL_TRANSITION = register("illegal_transition", 409, "The request is not in a state that allows this.")
ALREADY_DECIDED = register("already_decided", 409, "Someone decided the request first; `details` says who.")
ALREADY_VOTED = register("already_voted", 409, "You already decided this revision.")
DECISION_DEADLINE_PASSED = register("decision_deadline_passed", 409, "The decision deadline passed; it expired.")
REVISION_CHANGED = register("revision_changed", 409, "The request moved to another revision since you looked.")
REVISION_REQUIRED = register(
    "revision_required", 422, "A decision names the revision it was made on (`revision`, or the API's `If-Match`)."
)
NOT_PERMITTED = register("not_permitted", 403, "You may not do this to this request.")
SEPARATION_OF_DUTIES = register(
    "separation_of_duties", 403, "The agent's owner and the person it acts for cannot approve."
)
PARAM_NOT_EDITABLE = register("param_not_editable", 422, "The rule does not let reviewers edit these params.")
EDIT_PROHIBITED = register("edit_prohibited", 422, "Policy refuses the call as edited.")
NO_CHANGES = register("no_changes", 422, "The edits change nothing.")
INVALID_EDIT = register("invalid_edit", 422, "An edited value is malformed.")
DECISION_NOT_ALLOWED = register("decision_not_allowed", 422, "The submission does not allow this decision.")
REPLY_REQUIRED = register("reply_required", 422, "A reply in place of the tool needs a message.")
INVALID_ACTION_TYPE = register("invalid_action_type", 422, "The action type is outside the documented syntax.")
# --- Step-up (services.step_up) ----------------------------------------------------------
STEP_UP_REQUIRED = register("step_up_required", 403, "Deciding at this level needs a proof made for this decision.")
STEP_UP_FAILED = register("step_up_failed", 403, "The step-up proof was wrong.")
STEP_UP_THROTTLED = register(
    "step_up_throttled",
    429,
    "Too many wrong passwords or codes for this account from here: wait `retry_after` seconds.",
)
SESSION_ENDED = register("session_ended", 401, "Too many wrong step-up proofs ended the session.")
NO_PASSKEY = register("no_passkey", 409, "The person has no passkey to confirm with (they add one at /accounts/2fa/).")
# --- Execution and re-validation (DESIGN.md "Re-validation") --------------------------------
ALREADY_CLAIMED = register("already_claimed", 409, "Another executor holds the claim, or no attempt is due.")
ATTEMPTS_EXHAUSTED = register("attempts_exhausted", 409, "No execution attempts are left.")
INVALID_GRANT = register("invalid_grant", 403, "That execution grant is not valid for this request.")
EXECUTED_BY_SERVER = register("executed_by_server", 409, "A server-side executor runs this request.")
APPROVAL_EXPIRED = register("approval_expired", 409, "The approval's execution window passed.")
TARGET_CHANGED = register("target_changed_reapproval_required", 409, "The target changed since it was approved.")
APPROVER_PERMISSION_REVOKED = register("approver_permission_revoked", 409, "An approver lost the permission.")
POLICY_CHANGED = register("policy_changed_reapproval_required", 409, "The current policy is stricter for this call.")
EMERGENCY_STOP = register("emergency_stop", 409, "An emergency stop is on: nothing is approved, claimed or executed.")
OUTCOME_UNKNOWN = register("outcome_unknown", 409, "The execution's outcome is unknown (its lease ran out).")
LEASE_EXPIRED = register(
    "lease_expired",
    409,
    "The execution lease ran out: it is not renewed, and a late report is recorded but changes no outcome.",
)
# --- Masked params (services.reveal_field) -------------------------------------------------------
FIELD_NOT_MASKED = register("field_not_masked", 422, "The field is not a masked parameter of this request.")
MASKED_PROBE_REFUSED = register(
    "masked_probe_refused",
    403,
    "A rule test on a real request reads a masked param "
    "by value; only someone who may reveal it on that request, while it is pending, may.",
)
# --- Deadline extensions (services.extend_decision_deadline) -----------------------------------
EXTENSION_NOT_ALLOWED = register("extension_not_allowed", 422, "The rule allows no such extension.")
ALREADY_EXTENDED = register("already_extended", 409, "The deadline was already extended once.")

REVALIDATION_CODES = (APPROVAL_EXPIRED, TARGET_CHANGED, APPROVER_PERMISSION_REVOKED, POLICY_CHANGED, EMERGENCY_STOP)
# --- Suspensions (services.suspensions; the schema's own codes are in approvals.resume_schema) -----
RESUME_DATA_REQUIRED = register(
    "resume_data_required",
    422,
    "A suspension is answered with `respond` and `resume_data`; approve only agrees with an answer already proposed.",
)
NOT_A_SUSPENSION = register("not_a_suspension", 422, "Only a suspension is answered with `resume_data`.")
