"""Live push of request changes to reviewers' cards and waiting agents.

Only `publish_on_commit` is for services: a rolled-back change must never reach
a screen. After commit, each change goes to the channel layer groups below and
to any in-process listeners (tests register one). Channel messages are
at-most-once hints: clients resync from REST on (re)connect.

A sync view under daphne does not wait for its push: `push.run` queues it on
the server's event loop. Everywhere else (Celery, commands, the embedded
relay's senders, sync tests, code under `async_to_sync`) the push is sent
before `_deliver` returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

from . import push

logger = logging.getLogger(__name__)

CARD_CREATED = "card.created"
CARD_UPDATED = "card.updated"
CARD_REMOVED = "card.removed"

# The consumer method that receives these messages is `request_change`.
MESSAGE_TYPE = "request.change"


def approvers_group(group_id: int) -> str:
    """Channel group of everyone in one approver (auth) group."""
    return f"approvers-{group_id}"


def agent_group(agent_id: int) -> str:
    """Channel group of one agent's sockets and long-polls."""
    return f"agent-{agent_id}"


def request_group(request_id: str) -> str:
    """Channel group of whoever waits on one request (a long-poll)."""
    return f"request-{request_id}"


@dataclass(frozen=True)
class Change:
    event: str
    request_id: str
    state: str
    approver_group_id: int | None
    agent_id: int
    data: dict[str, Any] = field(default_factory=dict)
    # Every group that may see the card: the approver group and any escalation group.
    viewer_group_ids: tuple[int, ...] = ()
    # The classifying rule, for in-process listeners (notifications look up its
    # settings without reading the request); not sent to the channel layer.
    rule_name: str = ""
    # The change created the request: no one can wait on its id yet (the id is in
    # the response still being written), so its request group is not sent to.
    new_request: bool = False

    def channel_groups(self) -> list[str]:
        groups = [agent_group(self.agent_id)]
        if not self.new_request:
            groups.append(request_group(self.request_id))
        viewers = set(self.viewer_group_ids)
        if self.approver_group_id is not None:
            viewers.add(self.approver_group_id)
        groups.extend(approvers_group(group_id) for group_id in sorted(viewers))
        return groups


Listener = Callable[[Change], None]
_listeners: list[Listener] = []


def subscribe(listener: Listener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def unsubscribe(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def publish_on_commit(
    event: str, request, *, new_request: bool = False, former_group_ids: tuple[int, ...] = (), **data: Any
) -> None:
    """Push `event` about `request` after commit. `former_group_ids`: groups that just
    lost decide on it (a regrouping edit), whose screens must drop the card."""
    viewers = _viewer_group_ids(request) if request.escalated else ()
    change = Change(
        event=event,
        request_id=str(request.pk),
        state=request.state,
        approver_group_id=request.approver_group_id,
        agent_id=request.agent_id,
        data=data,
        viewer_group_ids=tuple(sorted({*viewers, *former_group_ids})),
        rule_name=request.rule_name,
        new_request=new_request,
    )
    transaction.on_commit(lambda: _deliver(change))


def _viewer_group_ids(request) -> tuple[int, ...]:
    from .models import ApprovalRequestGroupObjectPermission

    return tuple(
        ApprovalRequestGroupObjectPermission.objects.filter(content_object=request)
        .values_list("group_id", flat=True)
        .distinct()
    )


def _deliver(change: Change) -> None:
    _send_to_channel_layer(change)
    for listener in list(_listeners):
        try:
            listener(change)
        except Exception:  # a broken listener must not lose the others' updates
            logger.exception("broadcast listener %r failed", listener)


def _send_to_channel_layer(change: Change) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": MESSAGE_TYPE, **asdict(change)}
    for local_only in ("rule_name", "new_request"):
        del message[local_only]

    async def send_all() -> None:
        for group in change.channel_groups():
            try:
                await layer.group_send(group, message)
            except Exception:  # at-most-once by design: clients resync from REST
                logger.warning("could not push %s to %s", change.event, group, exc_info=True)

    push.run(change.event, send_all)
