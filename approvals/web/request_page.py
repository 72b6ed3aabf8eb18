"""History and the request page: what a decided request went through, for people who
may look at it (`permissions.with_view_grant_or_audit`: view holders and auditors).

Reads only, in a constant number of queries per page: the history list with its
filter choices and approvers, and one request with its revisions, decisions,
execution and audit timeline (the card's own builder, `cards.build_cards`, supplies
the params, edits, plan and target diffs, so the two never show them differently).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from audit.models import AuditEvent
from audit.vocabulary import phase_of

from ..filters import ApprovalRequestFilterSet
from ..models import ApprovalRequest, Decision, ParamsRevision
from ..permissions import with_view_grant_or_audit
from ..states import Kind, RiskLevel, State
from .cards import Card, build_cards

__all__ = ["RequestPage", "annotate_rows", "history", "history_choices", "request_page"]


def history(user, filters: ApprovalRequestFilterSet | None = None) -> QuerySet:
    """Decided (no longer pending) requests `user` may look at, most recently decided first."""
    decided = with_view_grant_or_audit(user).exclude(state__in=(State.DRAFT, State.PENDING_APPROVAL))
    if filters is not None:
        decided = filters.narrow(decided)
    return decided.select_related("agent", "requested_for").order_by("-decided_at", "-created_at")


def history_choices(user) -> dict[str, list[str]]:
    """Every agent, action type, risk level and decider in the user's visible history, for
    the filter form (the queue's choices come from its most urgent rows, which left most of
    history unselectable). One query: the distinct combinations, however long the history."""
    seen = set(
        history(user).order_by().values_list("agent__name", "action_type", "risk_level", "decided_by_label").distinct()
    )
    seen_levels = {level for _, _, level, _ in seen}
    return {
        "deciders": sorted({decider for _, _, _, decider in seen if decider}),
        "agents": sorted({agent for agent, _, _, _ in seen}),
        "action_types": sorted({action for _, action, _, _ in seen}),
        "risk_levels": [level for level in RiskLevel.values if level in seen_levels],
    }


def annotate_rows(rows: Sequence[ApprovalRequest]) -> None:
    """Give each history row `approvers` (who approved the revision it ended on, all of
    them for a two-person approval) and `edited_by` (who edited its params). One query."""
    approvers: dict[Any, list[str]] = defaultdict(list)
    editors: dict[Any, list[str]] = defaultdict(list)
    revision_of = {row.pk: row.current_revision for row in rows}
    for request_id, revision, name in (
        Decision.objects.filter(request_id__in=list(revision_of), verdict=Decision.Verdict.APPROVE)
        .order_by("created_at")
        .values_list("request_id", "revision", "reviewer__username")
    ):
        if revision == revision_of[request_id]:
            approvers[request_id].append(name)
    for request_id, name in (
        ParamsRevision.objects.filter(request_id__in=list(revision_of), number__gt=1)
        .order_by("number")
        .values_list("request_id", "created_by__username")
    ):
        if name and name not in editors[request_id]:
            editors[request_id].append(name)
    for row in rows:
        row.approvers = approvers[row.pk]
        row.edited_by = editors[row.pk]
        # A suspension's later revisions are its answers, not edits of what the agent asked.
        row.answered = row.kind == Kind.SUSPENSION and row.current_revision > 1
        row.edited = row.current_revision > 1 and not row.answered


@dataclass
class TimelineEvent:
    seq: int
    occurred_at: Any
    actor_kind: str
    actor_label: str
    verb: str
    metadata: dict
    phase: str


@dataclass
class RequestPage:
    card: Card
    decisions: list[Decision]
    timeline: list[TimelineEvent] = field(default_factory=list)

    @property
    def request(self) -> ApprovalRequest:
        return self.card.request

    @property
    def approvers(self) -> list[str]:
        return self.card.approvers

    @property
    def has_execution(self) -> bool:
        r = self.request
        return bool(r.attempts or r.result is not None or r.error or r.finished_at or r.lease_until)


def request_page(user, pk) -> RequestPage | None:
    """The request `pk` as its page shows it, or None when `user` may not look at it
    (the view answers 404 either way, so a request's existence never leaks).
    Nine queries at most, whatever the request's history."""
    found = build_cards(with_view_grant_or_audit(user).filter(pk=pk).select_related("approver_group"), viewer=user)
    if not found:
        return None
    card = found[0]
    decisions = list(
        Decision.objects.filter(request_id=card.request.pk).select_related("reviewer").order_by("created_at")
    )
    timeline = [
        TimelineEvent(phase=phase_of(event["verb"]), **event)
        for event in AuditEvent.objects.filter(request_id=card.request.pk)
        .order_by("seq")
        .values("seq", "occurred_at", "actor_kind", "actor_label", "verb", "metadata")
    ]
    return RequestPage(card=card, decisions=decisions, timeline=timeline)
