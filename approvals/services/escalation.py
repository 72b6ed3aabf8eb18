"""Who a pending request is routed to: quorum reachability, escalation to a second
group, and regrouping when an edit re-classifies it under another rule."""

from __future__ import annotations

from django.contrib.auth.models import Group

from audit.chain import Actor, record

from ..models import ApprovalRequest
from ..permissions import AUDITORS, eligible_approver_count, grant_group, revoke_decide_except
from ..states import State
from .classification import Classified, apply_classification
from .core import SYSTEM, RequestId, announce, changing
from .guards import expire_if_due

__all__ = ["check_quorum_reachable", "escalate_request", "escalation_refusal", "regroup"]


def check_quorum_reachable(request: ApprovalRequest, *, eligible: int | None = None) -> None:
    """Say at once when the group cannot reach the quorum, and escalate if the rule names a second group.

    `eligible`: the number of eligible approvers, when the caller counted it already.
    """
    if eligible is None:
        eligible = eligible_approver_count(request)
    if eligible >= request.required_approvals:
        if not request.quorum_reachable:
            request.quorum_reachable = True
            request.save(update_fields=["quorum_reachable"])
        return
    escalation = request.classification.get("escalation_group")
    group = Group.objects.filter(name=escalation).first() if escalation else None
    if group is not None and not request.escalated and escalation_refusal(request, group) is None:
        _escalate(request, group, reason="quorum_unreachable")
        eligible = eligible_approver_count(request)
        if eligible >= request.required_approvals:
            return
    request.quorum_reachable = False
    request.save(update_fields=["quorum_reachable"])
    record(
        "request.quorum_unreachable",
        actor=SYSTEM,
        request=request,
        metadata={"required": request.required_approvals, "eligible": eligible},
    )


def _escalate(request: ApprovalRequest, group: Group, *, reason: str) -> None:
    """Give `group` view and decide on a locked request and audit the escalation."""
    grant_group(request, group)
    request.escalated = True
    request.save(update_fields=["escalated"])
    record("request.escalated", actor=SYSTEM, request=request, metadata={"group": group.name, "reason": reason})
    announce(request, "request.escalated", escalated_to=group.name)


def escalation_refusal(request: ApprovalRequest, group: Group) -> str | None:
    """Why `group` may not be handed decide on `request`, or None.

    Escalation hands a request only to its rule's own approver group, to the rule's
    escalation group (part of the rule, which changes under four eyes) or to the
    escalation group of the rule's notification settings (saved only through the same
    four-eyes gate, `approvals.notifications.save_settings`). Never to auditors: they
    decide nothing (DESIGN.md).
    """
    from ..models import RuleNotification

    if group.name == AUDITORS:
        return "auditors decide nothing"
    if group.pk == request.approver_group_id or group.name == request.classification.get("escalation_group"):
        return None
    if (
        request.rule_name
        and RuleNotification.objects.filter(rule_name=request.rule_name, escalation_group=group).exists()
    ):
        return None
    return f"{group.name} is neither this rule's approver group nor an approved escalation target"


def escalate_request(request_id: RequestId, *, group: Group, reason: str) -> bool:
    """Escalate a pending request to `group` (view and decide); False if it is no
    longer pending or was escalated before, or if `group` is not one escalation may
    hand it to (`escalation_refusal`: audited ``request.escalation_refused``). A
    deadline that passed is persisted (the request expires) and False is returned."""
    with changing(request_id) as request:
        if expire_if_due(request) is not None:
            return False
        if request.state != State.PENDING_APPROVAL or request.escalated:
            return False
        refused = escalation_refusal(request, group)
        if refused is not None:
            record(
                "request.escalation_refused",
                actor=SYSTEM,
                request=request,
                metadata={"group": group.name, "reason": reason, "refused_because": refused},
            )
            return False
        _escalate(request, group, reason=reason)
    return True


def regroup(request: ApprovalRequest, classified: Classified, *, actor: Actor) -> None:
    """Route a locked, pending request to the classification an edit made decide.

    The new rule's group is granted; every other group loses decide on the request
    (it keeps view, so their history still shows it) and their cards go; the
    escalation of the old classification no longer applies; whether the new group
    can reach the quorum is said at once.
    """
    before = {
        "risk_level": request.risk_level,
        "rule": request.rule_name,
        "required_approvals": request.required_approvals,
        "group": request.approver_group.name if request.approver_group is not None else None,
    }
    apply_classification(request, classified)
    request.escalated = False
    request.save()
    if request.approver_group is not None:
        grant_group(request, request.approver_group)
    former = revoke_decide_except(request, request.approver_group)
    record(
        "request.reclassified",
        actor=actor,
        request=request,
        metadata={
            "revision": request.current_revision,
            "from": before,
            "to": {
                "risk_level": request.risk_level,
                "rule": request.rule_name,
                "required_approvals": request.required_approvals,
                "group": request.approver_group.name if request.approver_group is not None else None,
            },
            "groups_revoked": former,
        },
    )
    announce(request, "request.reclassified", former_group_ids=tuple(former))
    check_quorum_reachable(request)
