"""What each card of the reviewer dashboard shows, precomputed for a page of requests
in a constant number of queries (`build_cards`).

`dashboard` chooses the requests and their order; this module only reads them.
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.safestring import SafeString

from audit.models import AuditEvent
from audit.vocabulary import describe

from ..masking import MASK
from ..models import ApprovalRequest, Decision, ParamsRevision
from ..services.step_up import needs_step_up
from ..snapshots import resolver_for, stable_hash
from ..states import STATE_COLOURS, Kind, RiskLevel
from .dashboard import queue_rank
from .markdown import render_markdown

__all__ = ["Card", "build_cards", "card_version"]


@dataclass
class ParamRow:
    """One param as shown (`value`) and as pre-filled for editing (`edit_value`: the
    text itself for strings, JSON otherwise; empty when masked)."""

    key: str
    value: str
    masked: bool
    editable: bool
    is_text: bool
    changed: bool = False
    edit_value: str = ""
    is_set: bool = True


@dataclass
class HistoryRow:
    at: Any
    actor: str
    verb: str
    description: str


@dataclass
class DiffLine:
    kind: str  # "add", "del", "ctx", "hunk"
    text: str


@dataclass
class ParamChange:
    revision: int
    by: str
    key: str
    before: str
    after: str


@dataclass
class TargetChange:
    """One field the call would change on its target: the resolver's current value
    against the proposed param (text gets a line diff)."""

    key: str
    current: str
    proposed: str
    diff: list[DiffLine] = field(default_factory=list)


@dataclass
class TargetView:
    changes: list[TargetChange]
    drifted: bool  # the target changed since the agent submitted; claims will refuse
    unavailable: str = ""


@dataclass
class Card:
    """Everything one card shows, precomputed so the template only lays it out."""

    request: ApprovalRequest
    params: list[ParamRow]
    plan_html: SafeString | None
    approvals: int
    required: int
    approvers: list[str]
    viewer_voted: str | None
    viewer_may_approve: bool
    viewer_excluded_reason: str
    history: list[HistoryRow]
    impact: list[tuple[str, str]]
    explanation: list[str]
    plan_diff: list[DiffLine] = field(default_factory=list)
    previous_feedback: str = ""
    previous_decided_by: str = ""
    param_changes: list[ParamChange] = field(default_factory=list)
    target_view: TargetView | None = None
    links: dict[str, str] = field(default_factory=dict)  # the card's form actions, by name
    # Who edited the current revision without their approval counting (a proposal).
    proposed_by: str = ""
    id: str = field(init=False)

    def __post_init__(self) -> None:
        self.id = str(self.request.pk)  # read ~20 times per card by the template

    @property
    def risk_colour(self) -> str:
        try:
            return RiskLevel(self.request.risk_level).colour
        except ValueError:
            return "grey"

    @property
    def state_colour(self) -> str:
        return STATE_COLOURS.get(self.request.state, "grey")

    @property
    def is_critical(self) -> bool:
        return self.request.risk_level == RiskLevel.CRITICAL

    @property
    def needs_step_up(self) -> bool:
        """Approving asks for a proof of presence (the services check it; this only shows the field)."""
        return needs_step_up(self.request.risk_level,
                             rule_asks=bool((self.request.classification or {}).get("step_up")))

    @property
    def is_plan(self) -> bool:
        return self.request.kind == Kind.PLAN

    @property
    def editable_params(self) -> list[ParamRow]:
        return [row for row in self.params if row.editable]

    @property
    def version(self) -> str:
        return card_version(self.request, self.approvals)

    @property
    def sort_key(self) -> str:
        """Orders cards in the browser the way `queue` orders them on the server."""
        deadline = self.request.decide_by.isoformat() if self.request.decide_by else "9999"
        return f"{deadline}|{queue_rank(self.request.risk_level)}|{self.request.created_at.isoformat()}"


def card_version(request: ApprovalRequest, approvals: int) -> str:
    """Changes whenever what a card shows changes (the resync compares it)."""
    return f"{request.state}:{request.current_revision}:{approvals}:{request.risk_level}:{int(request.quorum_reachable)}"


def _show(value: Any) -> tuple[str, bool]:
    """A param value as reviewers read it, and whether it reads as plain text
    (strings, numbers, and lists of them joined with commas)."""
    if isinstance(value, str):
        return value, True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value), True
    if isinstance(value, list) and all(isinstance(item, (str, int, float)) for item in value):
        return ", ".join(str(item) for item in value), True
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True), False


def _edit_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _impact_rows(impact: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the action touches, in words; zero counts and empty facts are left out
    so the facts that matter stand out. Reversibility and sensitivity always show."""
    rows = []
    if impact.get("recipient_count"):
        rows.append(("Recipients", str(impact["recipient_count"])))
    if impact.get("amount") not in (None, "", "0"):
        rows.append(("Amount", str(impact["amount"])))
    if impact.get("target_count", 0) > 1:
        rows.append(("Targets", str(impact["target_count"])))
    if "reversible" in impact:
        rows.append(("Reversible", "yes" if impact["reversible"] else "no"))
    if "sensitive" in impact:
        kinds = ", ".join(str(kind) for kind in impact.get("sensitive_kinds") or ())
        rows.append(("Sensitive data", (kinds or "yes") if impact["sensitive"] else "none found"))
    known = {"recipient_count", "amount", "target_count", "reversible", "sensitive", "sensitive_kinds"}
    for key in sorted(set(impact) - known):
        value = impact[key]
        rows.append((key.replace("_", " ").capitalize(), json.dumps(value) if not isinstance(value, str) else value))
    return rows


def _plan_diff(before: str, after: str) -> list[DiffLine]:
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("add", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("del", line[1:]))
        else:
            lines.append(DiffLine("ctx", line[1:]))
    return lines


def build_cards(requests: Iterable[ApprovalRequest], *, viewer) -> list[Card]:
    """Cards for `requests` (in the given order) as `viewer` sees them.

    Four queries however many requests: the requests with their agent, people and
    previous revision; all their param revisions; all decisions with reviewers; all
    audit events. Callers pass a queryset or list; it is evaluated once here.
    """
    requests = list(
        requests.select_related("agent", "agent__owner", "requested_for", "supersedes")
        if isinstance(requests, QuerySet)
        else requests
    )
    if not requests:
        return []
    ids = [r.pk for r in requests]
    revisions: dict[Any, dict[int, ParamsRevision]] = defaultdict(dict)
    for revision in ParamsRevision.objects.filter(request_id__in=ids).select_related("created_by"):
        revisions[revision.request_id][revision.number] = revision
    decisions: dict[Any, list[Decision]] = defaultdict(list)
    for decision in Decision.objects.filter(request_id__in=ids).select_related("reviewer"):
        decisions[decision.request_id].append(decision)
    events: dict[Any, list[AuditEvent]] = defaultdict(list)
    for event in AuditEvent.objects.filter(request_id__in=ids).order_by("seq").only(
        "seq", "occurred_at", "actor_label", "verb", "request_id"
    ):
        events[event.request_id].append(event)

    links = _link_patterns()
    return [_card(r, revisions[r.pk], decisions[r.pk], events[r.pk], viewer, links) for r in requests]


# Each card posts to these views with its own id.
_CARD_ACTIONS = {
    "approve": "approvals:approve",
    "reject": "approvals:reject",
    "approve_with_edits": "approvals:approve-with-edits",
    "extend": "rules:extend-deadline",
}
_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def _link_patterns() -> dict[str, str]:
    """The card actions' URLs with a placeholder id, reversed once per page: `{% url %}`
    four times per card was a fifth of the queue's render time at 100 cards."""
    return {name: reverse(view, args=[_PLACEHOLDER]) for name, view in _CARD_ACTIONS.items()}


def _card(request, revisions: dict[int, Any], decisions: list[Decision], events: list[AuditEvent], viewer,
          link_patterns: Mapping[str, str]) -> Card:
    classification = request.classification or {}
    masked = set(classification.get("masked_params", ()))
    # Nothing is editable where the host runs the call as submitted (the core refuses such an edit too).
    editable = set(classification.get("editable_params", ())) if request.host_applies_edits else set()
    current = revisions.get(request.current_revision)
    params = current.params if current else {}
    changed_now = set(current.changed_keys) if current and request.current_revision > 1 else set()
    rows = []
    for key in sorted(params):
        text, is_text = _show(params[key])
        hidden = key in masked
        rows.append(ParamRow(key, MASK if hidden else text, hidden, key in editable, is_text, key in changed_now,
                             edit_value="" if hidden else _edit_text(params[key])))
    # Editable params the agent left out can still be set by an editor (edit form only).
    for key in sorted(editable - set(params)):
        rows.append(ParamRow(key, "", key in masked, True, True, is_set=False))

    this_revision = [d for d in decisions if d.revision == request.current_revision]
    approvers = sorted({d.reviewer.get_username() for d in this_revision if d.verdict == Decision.Verdict.APPROVE})
    mine = next((d for d in this_revision if d.reviewer_id == getattr(viewer, "pk", None)), None)
    excluded = {request.requested_for_id: "the person this action is for",
                request.agent.owner_id: "the agent's owner"}
    excluded.pop(None, None)
    excluded_reason = excluded.get(getattr(viewer, "pk", None), "")

    param_changes = []
    for number in sorted(revisions):
        if number == 1:
            continue
        before, after = revisions.get(number - 1), revisions[number]
        for key in after.changed_keys:
            old = before.params.get(key) if before else None
            new = after.params.get(key)
            param_changes.append(ParamChange(
                revision=number,
                by=after.created_by.get_username() if after.created_by else "system",
                key=key,
                before=MASK if key in masked else _show(old)[0] if old is not None else "(not set)",
                after=MASK if key in masked else _show(new)[0],
            ))

    card = Card(
        request=request,
        params=rows,
        plan_html=render_markdown(request.plan_markdown) if request.kind == Kind.PLAN else None,
        approvals=len(approvers),
        required=request.required_approvals,
        approvers=approvers,
        viewer_voted=mine.verdict if mine else None,
        viewer_may_approve=not excluded_reason and mine is None,
        viewer_excluded_reason=excluded_reason,
        history=[HistoryRow(e.occurred_at, e.actor_label, e.verb, _describe(e.verb)) for e in events],
        impact=_impact_rows(request.impact or {}),
        explanation=list(classification.get("explanation", ())) or [classification.get("reason", "")],
        param_changes=param_changes,
        target_view=_target_view(request, params, masked),
        links={name: url.replace(_PLACEHOLDER, str(request.pk)) for name, url in link_patterns.items()},
    )
    if current is not None and request.current_revision > 1 and current.created_by is not None:
        editor = current.created_by.get_username()
        if editor not in approvers:
            card.proposed_by = editor
    previous = request.supersedes
    if previous is not None:
        card.previous_feedback = previous.feedback
        card.previous_decided_by = previous.decided_by_label
        if request.kind == Kind.PLAN:
            card.plan_diff = _plan_diff(previous.plan_markdown, request.plan_markdown)
    return card


def _target_view(request, params: Mapping[str, Any], masked: set[str]) -> TargetView | None:
    """Where the action type has a target resolver, what the call would change on the
    target as it is now. Resolvers read the outside world, not this database, so the
    queue's query count stays constant."""
    resolver = resolver_for(request.action_type)
    if resolver is None or request.kind != Kind.ACTION:
        return None
    try:
        current = resolver(request.target)
    except Exception as exc:  # the card must render even when the target cannot be read
        return TargetView(changes=[], drifted=False, unavailable=f"Could not read the current target: {exc}")
    changes = []
    for key in sorted(set(params) & set(current)):
        if params[key] == current[key]:
            continue
        if key in masked:
            changes.append(TargetChange(key, MASK, MASK))
            continue
        before, after = _show(current[key])[0], _show(params[key])[0]
        multiline = isinstance(current[key], str) and isinstance(params[key], str) and (
            "\n" in current[key] or "\n" in params[key])
        changes.append(TargetChange(key, before, after, _plan_diff(before, after) if multiline else []))
    return TargetView(changes=changes, drifted=stable_hash(current) != request.target_hash)


def _describe(verb: str) -> str:
    try:
        return describe(verb)
    except KeyError:
        return verb
