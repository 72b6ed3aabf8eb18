"""A batch's cards shown together: one header row and one pane to decide them all at once, while
each member keeps its own card, row, decision and audit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.urls import reverse

from .queue_queries import queue_rank

if TYPE_CHECKING:  # cards re-exports this module's names, so the import is for the types only
    from .cards import Card


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
    def decide_by(self) -> datetime | None:
        """The most urgent member's deadline: the group's time left (None when no member has one)."""
        deadlines = [card.request.decide_by for card in self.members if card.request.decide_by is not None]
        return min(deadlines) if deadlines else None

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
    one batch are on the page (`queue_queries.queue_page` put them side by side). A batch
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


def sync_entries(shown: list[Card]) -> list[dict[str, str]]:
    """The queue sync's list: each entry the page shows, in order; a batch group (its
    header row and pane, fetched from its own URL) before its members."""
    entries = []
    for entry in group_batches(shown):
        members = entry.members if isinstance(entry, BatchGroup) else [entry]
        if isinstance(entry, BatchGroup):
            entries.append(
                {
                    "id": entry.id,
                    "version": entry.version,
                    "sort": entry.sort_key,
                    "url": reverse("approvals:batch-card", args=[entry.first.id]),
                }
            )
        entries += [
            {"id": card.id, "version": card.version, "sort": card.sort_key, "group": card.group_id} for card in members
        ]
    return entries
