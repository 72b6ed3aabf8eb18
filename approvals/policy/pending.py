"""Proposing a change that is not a rule set: notification settings or membership that
grant something wait here for a second risk-admin (`approvals.policy.approve_proposal`
applies them). Rule sets are proposed by `approvals.policy.changes`.
"""

from __future__ import annotations

from typing import Any

from audit.chain import record

from ..models import PolicyProposal
from .changes import lock_newest_version, rules_and_verbs
from .checks import audit_actor, user_label

__all__ = ["Kind", "propose"]

Kind = PolicyProposal.Kind


def propose(
    kind: str, payload: dict[str, Any], *, acting_user: Any, note: str, waits: str, diff: dict[str, Any]
) -> PolicyProposal:
    """A pending proposal of a notification or membership change, against the newest version
    (it goes stale, like a rule proposal, when the policy changes first).

    Call inside the change (`approvals.atomic.applying`); audited ``policy.proposed``.
    """
    newest = lock_newest_version()
    rules, verbs = rules_and_verbs(newest)
    proposal = PolicyProposal.objects.create(
        kind=kind,
        payload=payload,
        waits_because=waits,
        proposed_by=acting_user,
        proposed_by_label=user_label(acting_user),
        note=note,
        base_version=newest,
        rules=rules,
        destructive_verbs=verbs,
        diff=diff,
        dry_run={"summary": "No request is classified differently: this changes who may decide or until when."},
    )
    record(
        "policy.proposed",
        actor=audit_actor(acting_user),
        metadata={
            "proposal": proposal.pk,
            "kind": kind,
            "base_version": newest.number if newest else None,
            "note": note,
            "diff": diff,
            "waits_because": waits,
        },
    )
    return proposal
