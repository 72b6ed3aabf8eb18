"""What each card of the reviewer dashboard shows, precomputed for a page of requests
in a constant number of queries (`build_cards`).

`dashboard` chooses the requests and their order; this module only reads them.
"""

from __future__ import annotations

import difflib
import hashlib
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

from ..masking import MASK, masked_paths, shown_impact, shown_params
from ..models import ApprovalRequest, Decision, ParamsRevision, RuleNotification
from ..services.step_up import needs_step_up
from ..snapshots import resolver_for, stable_hash
from ..states import STATE_COLOURS, Kind, RiskLevel
from .markdown import render_markdown
from .queue_queries import batch_key, queue_rank

__all__ = ["CARD_RELATIONS", "BatchGroup", "Card", "build_cards", "card_version", "group_batches"]

# What every card reads beside the request row; `dashboard.queue_page` joins them in
# the page's own query. The reverse one-to-one says whether the one extension is used.
CARD_RELATIONS = ("agent", "agent__owner", "requested_for", "supersedes", "deadline_extension")
# The extensions a card offers, in seconds and words; only those within the rule's limit show.
EXTENSION_CHOICES = ((900, "by 15 minutes"), (3600, "by 1 hour"), (14400, "by 4 hours"))


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

    is_group = False  # the queue's entries are cards and `BatchGroup`s
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
    # The deadline extensions that can work: within the rule's limit, none used yet.
    extension_choices: list[tuple[int, str]] = field(default_factory=list)
    # The page id of the batch group this card shows in (`group_batches`), if any.
    group_id: str = ""
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
        return needs_step_up(
            self.request.risk_level, rule_asks=bool((self.request.classification or {}).get("step_up"))
        )

    @property
    def is_plan(self) -> bool:
        return self.request.kind == Kind.PLAN

    @property
    def batch_id(self) -> str:
        """The agent step it was submitted with (empty: alone)."""
        return self.request.batch_id

    @property
    def batch_group(self) -> str:
        """What the queue groups a batch by (`dashboard.batch_key`): the agent and its batch id."""
        key = batch_key(self.request)
        return f"{key[0]}:{key[1]}" if key else ""

    @property
    def params_summary(self) -> str:
        """One line of the params for a batch's member list (masked ones stay masked)."""
        shown = ", ".join(f"{row.key}={row.value}" for row in self.params if row.is_set)
        return shown if len(shown) <= 100 else shown[:99] + "…"

    @property
    def allows_reply(self) -> bool:
        """The agent's host takes a reply in place of the tool (the services check it; this only offers it)."""
        return self.request.kind == Kind.ACTION and self.request.allows("respond")

    @property
    def editable_params(self) -> list[ParamRow]:
        return [row for row in self.params if row.editable]

    @property
    def version(self) -> str:
        return card_version(self.request, self.approvals)

    @property
    def sort_key(self) -> str:
        """The urgency order as text (rank, deadline, age); the page places a card
        that arrives between resyncs by it, and each resync restores the server's order."""
        deadline = self.request.decide_by.isoformat() if self.request.decide_by else "9999"
        return f"{queue_rank(self.request.risk_level)}|{deadline}|{self.request.created_at.isoformat()}"

    @property
    def may_edit(self) -> bool:
        """ "Edit & approve" is offered only where it can work: something is editable
        and the viewer's approval could count."""
        return bool(self.editable_params) and self.viewer_may_approve

    @property
    def target_summary(self) -> str:
        """One line for the triage list: the target's values, or the plan's path."""
        if self.is_plan:
            return self.request.plan_path or ""
        target = self.request.target
        if isinstance(target, Mapping):
            return ", ".join(_show(value)[0] for value in target.values())[:120]
        return _show(target)[0][:120] if target else ""


@dataclass
class BatchGroup:
    """The members of one batch (one agent step with several calls) as the queue shows
    them together: a header row and a pane to decide them all at once. Each member
    keeps its own card, row, decision and audit."""

    members: list[Card]
    is_group = True

    @property
    def key(self) -> str:
        return self.members[0].batch_group

    @property
    def id(self) -> str:
        """The page's id for the group: stable while the batch lasts, whichever members
        are left, and free of the agent's text (it goes into element ids)."""
        return "batch-" + hashlib.sha256(self.key.encode()).hexdigest()[:16]

    @property
    def first(self) -> Card:
        return self.members[0]

    @property
    def agent_name(self) -> str:
        return self.first.request.agent.name

    @property
    def run_id(self) -> str:
        return next((card.request.run_id for card in self.members if card.request.run_id), "")

    @property
    def batch_id(self) -> str:
        return self.first.request.batch_id

    @property
    def most_severe(self) -> Card:
        return min(self.members, key=lambda card: queue_rank(card.request.risk_level))

    @property
    def risk_level(self) -> str:
        return self.most_severe.request.risk_level

    @property
    def risk_colour(self) -> str:
        return self.most_severe.risk_colour

    @property
    def decide_by(self):
        """The most urgent member's deadline: the group's time left."""
        return min(card.request.decide_by for card in self.members)

    @property
    def needs_step_up(self) -> bool:
        """Whether "approve all" asks for a proof (one, over the whole batch's digest)."""
        return any(card.needs_step_up for card in self.members)

    @property
    def version(self) -> str:
        """Changes whenever a member's card would (or the membership does)."""
        text = "|".join(f"{card.id}={card.version}" for card in self.members)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def sort_key(self) -> str:
        return self.first.sort_key


def group_batches(cards: list[Card]) -> list[Card | BatchGroup]:
    """The page's entries: single cards, and a `BatchGroup` where two or more cards of
    one batch are on the page (`dashboard.queue_page` put them side by side). A batch
    with one member left is a plain card again."""
    by_key: dict[str, list[Card]] = {}
    for card in cards:
        if card.batch_group:
            by_key.setdefault(card.batch_group, []).append(card)
    entries: list[Card | BatchGroup] = []
    for card in cards:
        members = by_key.get(card.batch_group) if card.batch_group else None
        if not members or len(members) < 2:
            entries.append(card)
        elif members[0] is card:
            group = BatchGroup(members)
            for member in members:
                member.group_id = group.id
            entries.append(group)
    return entries


def card_version(request: ApprovalRequest, approvals: int) -> str:
    """Changes whenever what a card shows changes (the resync compares it)."""
    return (
        f"{request.state}:{request.current_revision}:{approvals}:{request.risk_level}:{int(request.quorum_reachable)}"
    )


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

    Five queries however many requests: the requests with their agent, people,
    previous revision and extension; the rules' extension limits; all their param
    revisions; all decisions with reviewers; all audit events. Callers pass a queryset or list; it is evaluated once here.
    """
    requests = list(requests.select_related(*CARD_RELATIONS) if isinstance(requests, QuerySet) else requests)
    if not requests:
        return []
    ids = [r.pk for r in requests]
    limits = dict(
        RuleNotification.objects.filter(
            rule_name__in={r.rule_name for r in requests if r.rule_name},
            max_extension_seconds__gt=0,
        ).values_list("rule_name", "max_extension_seconds")
    )
    revisions: dict[Any, dict[int, ParamsRevision]] = defaultdict(dict)
    for revision in ParamsRevision.objects.filter(request_id__in=ids).select_related("created_by"):
        revisions[revision.request_id][revision.number] = revision
    decisions: dict[Any, list[Decision]] = defaultdict(list)
    for decision in Decision.objects.filter(request_id__in=ids).select_related("reviewer"):
        decisions[decision.request_id].append(decision)
    events: dict[Any, list[AuditEvent]] = defaultdict(list)
    for event in (
        AuditEvent.objects.filter(request_id__in=ids)
        .order_by("seq")
        .only("seq", "occurred_at", "actor_label", "verb", "request_id")
    ):
        events[event.request_id].append(event)

    links = _link_patterns()
    cards = [_card(r, revisions[r.pk], decisions[r.pk], events[r.pk], viewer, links) for r in requests]
    for card in cards:
        card.extension_choices = _extension_choices(card.request, limits.get(card.request.rule_name, 0))
    return cards


def _extension_choices(request: ApprovalRequest, limit: int) -> list[tuple[int, str]]:
    """What `services.extend_decision_deadline` would accept (it still decides)."""
    if limit <= 0 or _has_extension(request):
        return []
    return [(seconds, words) for seconds, words in EXTENSION_CHOICES if seconds <= limit] or [
        (limit, f"by {limit // 60} minutes" if limit >= 60 else f"by {limit} seconds")
    ]


def _has_extension(request: ApprovalRequest) -> bool:
    try:
        request.deadline_extension  # noqa: B018 (reading the reverse one-to-one raises when there is none)
    except ApprovalRequest.deadline_extension.RelatedObjectDoesNotExist:
        return False
    return True


# Each card posts to these views with its own id (and links to its page).
_CARD_ACTIONS = {
    "approve": "approvals:approve",
    "reject": "approvals:reject",
    "approve_with_edits": "approvals:approve-with-edits",
    "extend": "rules:extend-deadline",
    "respond": "approvals:respond",
    "step_up_challenge": "approvals:step-up-challenge",  # the passkey or provider challenge for a form's decision
    "page": "approvals:request",  # not a form: the request's own page, linked from the card
}
_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def _link_patterns() -> dict[str, str]:
    """The card actions' URLs with a placeholder id, reversed once per page: `{% url %}`
    four times per card was a fifth of the queue's render time at 100 cards."""
    return {name: reverse(view, args=[_PLACEHOLDER]) for name, view in _CARD_ACTIONS.items()}


def _card(
    request,
    revisions: dict[int, Any],
    decisions: list[Decision],
    events: list[AuditEvent],
    viewer,
    link_patterns: Mapping[str, str],
) -> Card:
    classification = request.classification or {}
    masked = set(masked_paths(request))
    # Nothing is editable where the host runs the call only as submitted (the core refuses such an edit too).
    editable = set(classification.get("editable_params", ())) if request.allows("edit") else set()
    current = revisions.get(request.current_revision)
    params = current.params if current else {}
    changed_now = set(current.changed_keys) if current and request.current_revision > 1 else set()
    rows = []
    shown = shown_params(request, params)  # the one choke point; masked values never reach the template
    for key in sorted(shown):
        hidden = key in masked
        text, is_text = (MASK, True) if hidden else _show(shown[key])
        rows.append(
            ParamRow(
                key,
                text,
                hidden,
                key in editable,
                is_text,
                key in changed_now,
                edit_value="" if hidden else _edit_text(shown[key]),
            )
        )
    # Editable params the agent left out can still be set by an editor (edit form only).
    for key in sorted(editable - set(params)):
        rows.append(ParamRow(key, "", key in masked, True, True, is_set=False))

    this_revision = [d for d in decisions if d.revision == request.current_revision]
    approvers = sorted({d.reviewer.get_username() for d in this_revision if d.verdict == Decision.Verdict.APPROVE})
    mine = next((d for d in this_revision if d.reviewer_id == getattr(viewer, "pk", None)), None)
    excluded = {request.requested_for_id: "the person this action is for", request.agent.owner_id: "the agent's owner"}
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
            param_changes.append(
                ParamChange(
                    revision=number,
                    by=after.created_by.get_username() if after.created_by else "system",
                    key=key,
                    before=MASK if key in masked else _show(old)[0] if old is not None else "(not set)",
                    after=MASK if key in masked else _show(new)[0],
                )
            )

    card = Card(
        request=request,
        params=rows,
        plan_html=render_markdown(request.plan_markdown) if request.kind in (Kind.PLAN, Kind.SUSPENSION) else None,
        approvals=len(approvers),
        required=request.required_approvals,
        approvers=approvers,
        viewer_voted=mine.verdict if mine else None,
        viewer_may_approve=not excluded_reason and mine is None,
        viewer_excluded_reason=excluded_reason,
        history=[HistoryRow(e.occurred_at, e.actor_label, e.verb, _describe(e.verb)) for e in events],
        impact=_impact_rows(shown_impact(request, params=params)),
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
        if key in masked:  # whether it differs from the target's value is a fact about the value too
            changes.append(TargetChange(key, MASK, MASK))
            continue
        if params[key] == current[key]:
            continue
        before, after = _show(current[key])[0], _show(params[key])[0]
        multiline = (
            isinstance(current[key], str)
            and isinstance(params[key], str)
            and ("\n" in current[key] or "\n" in params[key])
        )
        changes.append(TargetChange(key, before, after, _plan_diff(before, after) if multiline else []))
    return TargetView(changes=changes, drifted=stable_hash(current) != request.target_hash)


def _describe(verb: str) -> str:
    try:
        return describe(verb)
    except KeyError:
        return verb
