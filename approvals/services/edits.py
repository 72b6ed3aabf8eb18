"""Approve with edits (DESIGN.md "Approve with edits"): a new revision with the editable params
changed, re-classified, regrouped when that moves it elsewhere, and the editor's approval
counted only where it can count; otherwise the edit stands as a proposal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import Group

from audit.chain import digest, record
from audit.privacy import value_digest

from .. import errors
from ..emergency import is_stopped
from ..errors import DomainError
from ..masking import masked_paths
from ..models import ApprovalRequest, Decision, ParamsRevision
from ..people import Person
from ..permissions import excluded_from_approving, is_eligible_member
from ..states import Kind, RiskLevel
from .classification import Classified, apply_classification, classify_params, scrutiny
from .core import RequestId, announce, changing
from .escalation import regroup
from .guards import (
    require_allowed,
    require_may_decide,
    require_pending,
    rule_asks_step_up,
)
from .step_up import payload_digest, require_step_up

if TYPE_CHECKING:
    pass
from .votes import (
    APPROVE,
    _approve_if_quorum,
    _record_vote,
    _require_bounded_input,
    _require_revision,
    require_revision_given,
)

# The verdict a step-up proof for an edit is made over, with the edits' digest.
APPROVE_WITH_EDITS = "approve_with_edits"


def edit_decision(request_id: RequestId, revision: int | None, edits: dict[str, Any]) -> tuple[str, int, str, str]:
    """What a step-up proof for approving `edits` at `revision` binds: the request, the
    revision the edit was made on, the verdict and the digest of exactly these edits."""
    return (str(request_id), require_revision_given(revision), APPROVE_WITH_EDITS, payload_digest(edits))


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
