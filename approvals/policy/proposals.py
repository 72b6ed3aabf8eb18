"""Deciding a pending policy proposal: a second risk-admin approves or rejects it; its
author withdraws it. Each decision is one transaction with the proposal row locked,
audited in that transaction.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from audit.chain import Actor, record

from ..atomic import PersistedRefusal, applying, lock_row
from ..models import PolicyProposal, PolicyVersion
from ..people import user_of
from .changes import apply_rules, lock_newest_version, rules_and_verbs
from .checks import (
    FOUR_EYES_SAME_PERSON,
    PROPOSAL_NOT_FOUND,
    PROPOSAL_NOT_PENDING,
    PROPOSAL_STALE,
    PolicyError,
    audit_actor,
    groups_for,
    policy_diff,
    require_risk_admin,
    required_note,
    user_label,
)
from .membership_gate import apply_membership
from .notification_settings import apply_notifications
from .rules.engine import RuleSpec

__all__ = ["approve_proposal", "pending_proposals", "reject_proposal"]

Status = PolicyProposal.Status


class StaleProposal(PolicyError, PersistedRefusal):
    """`proposal_stale`: the proposal is marked stale, that mark commits, then this is raised."""


def pending_proposals() -> QuerySet[PolicyProposal]:
    """Pending proposals, oldest first, without their rule sets (one query)."""
    return (
        PolicyProposal.objects.filter(status=Status.PENDING)
        .order_by("created_at")
        .select_related("base_version")
        .only(
            "id",
            "created_at",
            "proposed_by_id",
            "proposed_by_label",
            "note",
            "diff",
            "status",
            "kind",
            "waits_because",
            "base_version__number",
        )
    )


def approve_proposal(proposal_id: int, *, actor: Actor | None, note: str = "") -> PolicyVersion:
    """Apply pending proposal `proposal_id` as a new version that names its author
    (`created_by`) and `acting_user` (`approved_by`).

    Refuses with PolicyError: `not_permitted` (not a risk-admin), `not_found`,
    `proposal_not_pending`, `four_eyes_same_person` (the author cannot approve
    their own change), and `proposal_stale` when another version was made after
    the proposal's base: the proposal is then marked stale (that persists) and
    nothing is applied. May raise RuleValidationError if a group it names was
    deleted meanwhile.
    """
    acting_user: Any = user_of(actor)
    require_risk_admin(acting_user)
    with applying():
        # The policy lock first, as every change takes it: approving applies a version.
        newest = lock_newest_version()
        proposal = _locked_pending(proposal_id)
        if proposal.proposed_by_id == acting_user.pk:
            raise PolicyError(
                FOUR_EYES_SAME_PERSON, "You proposed this change: a second risk-admin must approve it (four eyes)."
            )
        if proposal.base_version_id != (newest.pk if newest else None):
            _close(proposal, Status.STALE, acting_user, note)
            raise StaleProposal(
                PROPOSAL_STALE,
                (
                    f"The policy changed since this was proposed (now v{newest.number if newest else 0}): "
                    "nothing was applied; propose it again against the current policy."
                ),
            )
        elif proposal.kind != PolicyProposal.Kind.RULES:
            try:
                if proposal.kind == PolicyProposal.Kind.MEMBERSHIP:
                    apply_membership(proposal, acting_user)
                else:
                    apply_notifications(proposal, acting_user)
            except PolicyError as exc:
                _close(proposal, Status.STALE, acting_user, note)
                raise StaleProposal(exc.code, exc.message, http_status=exc.http_status) from exc
            else:
                # The rules stay; the version records that who may decide changed, and who agreed.
                rules, verbs = rules_and_verbs(newest)
                version = apply_rules(
                    rules,
                    verbs,
                    groups_for(RuleSpec.from_dict(rule) for rule in rules),
                    newest,
                    diff=proposal.diff,
                    note=proposal.note,
                    created_by=proposal.proposed_by,
                    how="approved",
                    approved_by=acting_user,
                    proposal=proposal,
                )
                proposal.applied_version = version
                _close(proposal, Status.APPLIED, acting_user, note)
        else:
            before, before_verbs = rules_and_verbs(newest)
            groups = groups_for(RuleSpec.from_dict(rule) for rule in proposal.rules)
            diff = policy_diff(before, before_verbs, proposal.rules, proposal.destructive_verbs)
            version = apply_rules(
                proposal.rules,
                list(proposal.destructive_verbs),
                groups,
                newest,
                diff=diff,
                note=proposal.note,
                created_by=proposal.proposed_by,
                how="approved",
                restored_from=proposal.restored_from,
                approved_by=acting_user,
                proposal=proposal,
            )
            proposal.applied_version = version
            _close(proposal, Status.APPLIED, acting_user, note)
    return version


def reject_proposal(proposal_id: int, *, actor: Actor | None, note: str) -> PolicyProposal:
    """Another risk-admin rejects pending proposal `proposal_id` (a note saying why is
    required); its author withdraws it (note optional). Nothing is applied.

    Refuses with PolicyError `not_permitted`, `not_found` or `proposal_not_pending`.
    """
    acting_user: Any = user_of(actor)
    require_risk_admin(acting_user)
    with applying():
        proposal = _locked_pending(proposal_id)
        withdrawing = proposal.proposed_by_id == acting_user.pk
        if not withdrawing:
            note = required_note(note, why="say why you reject this change")
        _close(proposal, Status.WITHDRAWN if withdrawing else Status.REJECTED, acting_user, note)
    return proposal


def _locked_pending(proposal_id: int) -> PolicyProposal:
    proposal = lock_row(PolicyProposal, pk=proposal_id)
    if proposal is None:
        raise PolicyError(PROPOSAL_NOT_FOUND, "No such policy proposal.")
    if proposal.status != Status.PENDING:
        raise PolicyError(PROPOSAL_NOT_PENDING, f"This proposal is already {proposal.get_status_display().lower()}.")
    return proposal


def _close(proposal: PolicyProposal, status: str, acting_user: Any, note: str) -> None:
    """Record the decision on the proposal and audit it (approved, or rejected/withdrawn/stale)."""
    proposal.status = status
    proposal.decided_at = timezone.now()
    proposal.decided_by = acting_user
    proposal.decided_by_label = user_label(acting_user)
    proposal.decision_note = note.strip() if isinstance(note, str) else ""
    proposal.save(
        update_fields=["status", "decided_at", "decided_by", "decided_by_label", "decision_note", "applied_version"]
    )
    verb = "policy.proposal_approved" if status == Status.APPLIED else "policy.proposal_rejected"
    record(
        verb,
        actor=audit_actor(acting_user),
        metadata={
            "proposal": proposal.pk,
            "outcome": str(status),
            "proposed_by": proposal.proposed_by_label,
            "note": proposal.decision_note,
            **({"version": proposal.applied_version.number} if proposal.applied_version is not None else {}),
        },
    )
