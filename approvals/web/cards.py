"""What each card of the reviewer dashboard shows, precomputed for a page of requests
in a constant number of queries (`build_cards`).

`dashboard` chooses the requests and their order; this module only reads them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.safestring import SafeString

from audit.models import AuditEvent

from ..masking import MASK, masked_paths, shown_impact, shown_params
from ..models import ApprovalRequest, Decision, ParamsRevision, RuleNotification
from ..services.step_up import needs_step_up
from ..states import STATE_COLOURS, Kind, RiskLevel
from .batch_groups import BatchGroup, group_batches
from .card_parts import (
    DiffLine,
    HistoryRow,
    ParamChange,
    ParamRow,
    TargetView,
    describe_verb,
    edit_text,
    impact_rows,
    plan_diff,
    read_target,
    show_value,
)
from .markdown import render_markdown
from .queue_queries import batch_key, queue_rank
from .summaries import Summary, summarize

__all__ = ["CARD_RELATIONS", "BatchGroup", "Card", "build_cards", "card_version", "group_batches"]


# What every card reads beside the request row; `dashboard.queue_page` joins them in
# the page's own query. The reverse one-to-one says whether the one extension is used.
CARD_RELATIONS = ("agent", "agent__owner", "requested_for", "supersedes", "deadline_extension")
# The extensions a card offers, in seconds and words; only those within the rule's limit show.
EXTENSION_CHOICES = ((900, "by 15 minutes"), (3600, "by 1 hour"), (14400, "by 4 hours"))


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
    # One line telling this request from its neighbours in the list (`summaries.summarize`).
    summary: Summary | None = None
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
    def is_suspension(self) -> bool:
        """A paused workflow step: answered through its schema's form, never approved bare."""
        return self.request.kind == Kind.SUSPENSION

    @property
    def batch_id(self) -> str:
        """The agent step it was submitted with (empty: alone)."""
        return self.request.batch_id

    @property
    def batch_group(self) -> str:
        """What the queue groups a batch by (`queue_queries.batch_key`): the agent and its batch id."""
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
        return bool(self.editable_params) and self.viewer_may_approve and not self.is_suspension

    @property
    def target_summary(self) -> str:
        """One line for the triage list: the target's values, or the plan's path."""
        if self.is_plan:
            return self.request.plan_path or ""
        target = self.request.target
        if isinstance(target, Mapping):
            return ", ".join(show_value(value)[0] for value in target.values())[:120]
        return show_value(target)[0][:120] if target else ""


def card_version(request: ApprovalRequest, approvals: int) -> str:
    """Changes whenever what a card shows changes (the resync compares it)."""
    return (
        f"{request.state}:{request.current_revision}:{approvals}:{request.risk_level}:{int(request.quorum_reachable)}"
    )


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
        text, is_text = (MASK, True) if hidden else show_value(shown[key])
        rows.append(
            ParamRow(
                key,
                text,
                hidden,
                key in editable,
                is_text,
                key in changed_now,
                edit_value="" if hidden else edit_text(shown[key]),
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
                    before=MASK if key in masked else show_value(old)[0] if old is not None else "(not set)",
                    after=MASK if key in masked else show_value(new)[0],
                )
            )

    impact = shown_impact(request, params=params)
    card = Card(
        request=request,
        summary=summarize(request, shown, impact),
        params=rows,
        plan_html=render_markdown(request.plan_markdown) if request.kind in (Kind.PLAN, Kind.SUSPENSION) else None,
        approvals=len(approvers),
        required=request.required_approvals,
        approvers=approvers,
        viewer_voted=mine.verdict if mine else None,
        viewer_may_approve=not excluded_reason and mine is None,
        viewer_excluded_reason=excluded_reason,
        history=[HistoryRow(e.occurred_at, e.actor_label, e.verb, describe_verb(e.verb)) for e in events],
        impact=impact_rows(impact),
        explanation=list(classification.get("explanation", ())) or [classification.get("reason", "")],
        param_changes=param_changes,
        target_view=read_target(request, params, masked),
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
            card.plan_diff = plan_diff(previous.plan_markdown, request.plan_markdown)
    return card
