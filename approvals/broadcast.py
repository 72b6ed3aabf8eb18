"""Live push of request changes to reviewers' cards and waiting agents.

Only `publish_on_commit` is for services: a rolled-back change must never reach
a screen. Delivery goes to registered listeners (the dashboard and agent sockets
register theirs when they land); with none registered, publishing is a no-op.
Messages are hints: clients resync from REST on (re)connect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

CARD_CREATED = "card.created"
CARD_UPDATED = "card.updated"
CARD_REMOVED = "card.removed"


@dataclass(frozen=True)
class Change:
    event: str
    request_id: str
    state: str
    approver_group_id: int | None
    agent_id: int
    data: dict[str, Any] = field(default_factory=dict)


Listener = Callable[[Change], None]
_listeners: list[Listener] = []


def subscribe(listener: Listener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def unsubscribe(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def publish_on_commit(event: str, request, **data: Any) -> None:
    change = Change(
        event=event,
        request_id=str(request.pk),
        state=request.state,
        approver_group_id=request.approver_group_id,
        agent_id=request.agent_id,
        data=data,
    )
    transaction.on_commit(lambda: _deliver(change))


def _deliver(change: Change) -> None:
    for listener in list(_listeners):
        listener(change)
