"""People's decisions: approve, reject, approve with edits, batches, and withdrawal.

Every path a person decides through (dashboard form, keyboard, JSON API, and any
later channel) calls these functions, which check every guard under the row lock
(`guards`, `step_up`); callers only translate a `DomainError` into their medium.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.utils import timezone

from audit.chain import Actor, digest, record
from audit.privacy import value_digest
from controlplane.http.codes import VALIDATION_ERROR
from controlplane.http.fields import json_size

from .. import errors
from ..emergency import is_stopped
from ..errors import DomainError
from ..masking import masked_paths
from ..models import ApprovalRequest, Decision, ParamsRevision
from ..people import Person
from ..permissions import excluded_from_approving, is_eligible_member
from ..states import Kind, RiskLevel, State
from .classification import Classified, apply_classification, classify_params, scrutiny
from .core import RequestId, announce, changing, refuse_state, transition
from .escalation import regroup
from .execution import server_executor
from .guards import (
    approvals_counted,
    refuse_if_expired,
    require_allowed,
    require_may_approve,
    require_may_decide,
    require_pending,
    require_proposed_answer,
    rule_asks_step_up,
)
from .step_up import payload_digest, require_step_up

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

APPROVE = Decision.Verdict.APPROVE
REJECT = Decision.Verdict.REJECT
# As long as the API lets feedback be (approvals/api/serializers.py); the page's forms are
# held to it here, before any lock is taken.
MAX_FEEDBACK_CHARS = 10_000


def _require_bounded_input(feedback: str, edits: dict[str, Any] | None = None) -> None:
    """Feedback and edits within the API's sizes, whichever path they came through (422)."""
    if len(feedback) > MAX_FEEDBACK_CHARS:
        raise DomainError(
            VALIDATION_ERROR, f"Feedback is limited to {MAX_FEEDBACK_CHARS} characters.", fields=["feedback"]
        )
    if edits is not None and json_size(edits) > settings.API_MAX_PARAMS_BYTES:
        raise DomainError(
            VALIDATION_ERROR, f"Edits are limited to {settings.API_MAX_PARAMS_BYTES} bytes as JSON.", fields=["edits"]
        )


# The verdict a step-up proof for an edit is made over, with the edits' digest.
APPROVE_WITH_EDITS = "approve_with_edits"


def edit_decision(request_id: RequestId, revision: int | None, edits: dict[str, Any]) -> tuple[str, int, str, str]:
    """What a step-up proof for approving `edits` at `revision` binds: the request, the
    revision the edit was made on, the verdict and the digest of exactly these edits."""
    return (str(request_id), require_revision_given(revision), APPROVE_WITH_EDITS, payload_digest(edits))


# --- Approve and reject -------------------------------------------------------------


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


def require_revision_given(revision: object) -> int:
    """Every decision names the revision it was made on (DESIGN.md "A decision names
    what it decides"): none, or something that is no revision number, is 422
    `revision_required`, before anything is locked or read. Returns the revision.

    The services take `revision: int | None` on purpose: a surface passes what it read
    (None when the reviewer's input named none) and the refusal is the core's, not the
    surface's, so no surface can decide without one by forgetting a check."""
    if type(revision) is not int or revision < 1:
        raise DomainError(
            errors.REVISION_REQUIRED,
            "Say which revision you decided on: send `revision` (the API also takes If-Match).",
            fields=["revision"],
        )
    return revision


def _require_revision(request: ApprovalRequest, revision: int) -> None:
    require_revision_given(revision)
    if revision != request.current_revision:
        raise DomainError(
            errors.REVISION_CHANGED,
            f"The request is at revision {request.current_revision} now, not {revision}; look at it again.",
            revision=request.current_revision,
        )


def _record_vote(
    request: ApprovalRequest, actor: Person, verdict: str, feedback: str, *, step_up_method: str = ""
) -> None:
    if Decision.objects.filter(request=request, revision=request.current_revision, reviewer=actor.user).exists():
        raise DomainError(errors.ALREADY_VOTED, "You already decided this revision.")
    Decision.objects.create(
        request=request,
        revision=request.current_revision,
        reviewer=actor.user,
        verdict=verdict,
        feedback=feedback,
        step_up_method=step_up_method,
    )
    record(
        "decision.recorded",
        actor=actor,
        request=request,
        metadata={
            "revision": request.current_revision,
            "verdict": verdict,
            "feedback": digest(feedback),
            **({"step_up": step_up_method} if step_up_method else {}),
            **(
                {"step_up_credential": actor.step_up.credential_id}
                if step_up_method and getattr(actor.step_up, "credential_id", "")
                else {}
            ),
        },
    )


def _approve_if_quorum(request: ApprovalRequest, actor: Person) -> None:
    counted = approvals_counted(request)
    if counted < request.required_approvals:
        announce(request, "decision.recorded", approvals=counted, required=request.required_approvals)
        return
    now = timezone.now()
    window = request.classification.get("execution_window_seconds", settings.DEFAULT_EXECUTION_WINDOW_SECONDS)
    transition(
        request,
        State.APPROVED,
        actor=actor,
        metadata={"revision": request.current_revision, "approvals": counted},
        decided_at=now,
        decided_by_label=actor.label,
        resolution_code="approved",
        execute_by=now + timedelta(seconds=window),
        executor=server_executor(request),
    )


# --- Approve with edits ------------------------------------------------------------------


def approve_with_edits(
    request_id: RequestId, *, actor: Person, revision: int | None, edits: dict[str, Any], feedback: str = ""
) -> ApprovalRequest:
    """Make a new revision with `edits` applied to the params the rule marks editable,
    and approve it where the editor's approval can count (DESIGN.md "Approve with edits").

    The new revision is re-classified; the classification demanding more (level,
    then required approvals; a tie goes to the new one) decides, with its own
    group: when that changes the level, group or quorum the request is regrouped.
    Approvals of earlier revisions stop counting. The editor's approval counts only
    where they are eligible under the deciding classification (in its group, not
    excluded by separation of duties, no emergency stop) and give the step-up its
    level needs; otherwise the edit stands as a proposal that group decides.

    `revision`: the revision the edit was made on (required; `revision_changed` when
    the request moved on). A step-up proof must be made for exactly these edits at
    that revision (`edit_decision`).
    """
    revision = require_revision_given(revision)
    _require_bounded_input(feedback, edits)
    with changing(request_id) as request:
        require_pending(request)
        _require_revision(request, revision)
        require_may_decide(request, actor)
        if request.kind == Kind.SUSPENSION:  # its payload is what the step paused with, not the answer
            raise DomainError(
                errors.RESUME_DATA_REQUIRED, "A suspension is answered, not edited: respond with resume_data."
            )
        require_allowed(request, "edit")
        previous = request.current_params()
        params, changed = _edited_params(request, previous, edits)
        fresh = classify_params(request, params)
        if fresh.classification.risk_level == RiskLevel.PROHIBITED:
            raise DomainError(errors.EDIT_PROHIBITED, f"Policy refuses the edited call: {fresh.classification.reason}")
        deciding = _deciding(request, fresh)
        regroups = deciding is not None and _routes_elsewhere(request, fresh)
        counts = _editor_counts(request, actor, deciding=deciding, regroups=regroups)
        method = ""
        if counts:
            risk_level, rule_asks = _deciding_step_up(request, deciding)
            method = require_step_up(
                request,
                actor,
                decision=edit_decision(request.pk, request.current_revision, edits),
                risk_level=risk_level,
                rule_asks=rule_asks,
            )
        _write_revision(
            request, actor, params, changed, previous, fresh, deciding=deciding, regroups=regroups, proposal=not counts
        )
        if counts:
            _record_vote(request, actor, APPROVE, feedback, step_up_method=method)
            _approve_if_quorum(request, actor)
        else:
            record(
                "request.edit_proposed",
                actor=actor,
                request=request,
                metadata={"revision": request.current_revision, "feedback": digest(feedback)},
            )
            announce(request, "request.edit_proposed")
    return request


def is_proposal(request: ApprovalRequest, *, by: Any) -> bool:
    """Whether `by` edited the request's current revision without their approval counting."""
    return (
        request.current_revision > 1
        and ParamsRevision.objects.filter(request=request, number=request.current_revision, created_by=by).exists()
        and not Decision.objects.filter(request=request, revision=request.current_revision, reviewer=by).exists()
    )


def _edited_params(
    request: ApprovalRequest, previous: dict[str, Any], edits: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    editable = set(request.classification.get("editable_params", ()))
    not_editable = sorted(set(edits) - editable)
    if not_editable:
        raise DomainError(
            errors.PARAM_NOT_EDITABLE,
            f"Not editable under rule {request.rule_name or 'default'}: {', '.join(not_editable)}.",
            fields=not_editable,
        )
    changed = sorted(key for key in edits if previous.get(key, object()) != edits[key])
    if not changed:
        raise DomainError(errors.NO_CHANGES, "The edits change nothing; approve instead.")
    return {**previous, **edits}, changed


def _deciding(request: ApprovalRequest, fresh: Classified) -> Classified | None:
    """The edit's classification when it demands at least as much as the request's
    (a tie goes to the new one); None when the request's own still decides."""
    new = fresh.classification
    if scrutiny(new.risk_level, new.required_approvals) >= scrutiny(request.risk_level, request.required_approvals):
        return fresh
    return None


def _routes_elsewhere(request: ApprovalRequest, fresh: Classified) -> bool:
    new = fresh.classification
    current_group = request.approver_group.name if request.approver_group is not None else None
    return (new.risk_level, new.approver_group, max(1, new.required_approvals)) != (
        request.risk_level,
        current_group,
        request.required_approvals,
    )


def _editor_counts(request: ApprovalRequest, actor: Person, *, deciding: Classified | None, regroups: bool) -> bool:
    """Whether the editor's approval can count for the new revision (step-up aside)."""
    if actor.user.pk in excluded_from_approving(request) or is_stopped(request.agent):
        return False
    if not regroups:
        return True  # the same group decides, and they hold decide on it
    group = Group.objects.filter(name=deciding.classification.approver_group).first() if deciding else None
    return is_eligible_member(actor.user, group)


def _deciding_step_up(request: ApprovalRequest, deciding: Classified | None) -> tuple[str, bool]:
    if deciding is None:
        return request.risk_level, rule_asks_step_up(request)
    return deciding.classification.risk_level, deciding.classification.step_up


def _write_revision(
    request: ApprovalRequest,
    actor: Person,
    params: dict[str, Any],
    changed: list[str],
    previous: dict[str, Any],
    fresh: Classified,
    *,
    deciding: Classified | None,
    regroups: bool,
    proposal: bool,
) -> None:
    hidden = masked_paths(request)  # masked before the edit; a regroup may add more below
    request.current_revision += 1
    ParamsRevision.objects.create(
        request=request,
        number=request.current_revision,
        params=params,
        created_by=actor.user,
        changed_keys=changed,
        risk_level=fresh.classification.risk_level,
    )
    if regroups:
        regroup(request, fresh, actor=actor)
    elif deciding is not None:
        apply_classification(request, deciding)
        request.save()
    else:
        request.impact = fresh.impact
        request.save(update_fields=["current_revision", "impact"])
    hidden |= masked_paths(request)
    record(
        "request.revised",
        actor=actor,
        request=request,
        metadata={
            "revision": request.current_revision,
            "changed": {
                key: {
                    "before": value_digest(request.action_type, key, previous.get(key), hidden=hidden),
                    "after": value_digest(request.action_type, key, params[key], hidden=hidden),
                }
                for key in changed
            },
            "risk_level": fresh.classification.risk_level,
            "reclassified": regroups,
            "proposal": proposal,
        },
    )


# --- Batches ----------------------------------------------------------------------------


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


# --- Withdrawal ---------------------------------------------------------------------------


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
