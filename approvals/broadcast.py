"""Live push of request changes to reviewers' cards and waiting agents.

A subscriber of the domain signal `request_changed` (sent after commit, so a
rolled-back change never reaches a screen): each change becomes one card event
sent to the channel layer groups below. Channel messages are at-most-once hints:
clients resync from REST on (re)connect.

A sync view under daphne does not wait for its push: `push.run` queues it on
the server's event loop. Everywhere else (Celery, commands, the embedded
relay's senders, sync tests, code under `async_to_sync`) the push is sent
before the subscriber returns.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

from channels.layers import get_channel_layer

from . import push
from .atomic import after_commit
from .services.core import RequestChange
from .states import State

logger = logging.getLogger(__name__)

CARD_CREATED = "card.created"
CARD_UPDATED = "card.updated"
CARD_REMOVED = "card.removed"

# The consumer method that receives these messages is `request_change`.
MESSAGE_TYPE = "request.change"


def approvers_group(group_id: int) -> str:
    """Channel group of everyone in one approver (auth) group."""
    return f"approvers-{group_id}"


def user_group(user_id: int) -> str:
    """Channel group of every reviewer socket one person has open."""
    return f"user-{user_id}"


def agent_group(agent_id: int) -> str:
    """Channel group of one agent's sockets and long-polls."""
    return f"agent-{agent_id}"


def request_group(request_id: str) -> str:
    """Channel group of whoever waits on one request (a long-poll)."""
    return f"request-{request_id}"


@dataclass(frozen=True)
class Change:
    """One card event, as the reviewer and agent sockets receive it."""

    event: str
    request_id: str
    state: str
    approver_group_id: int | None
    agent_id: int
    data: dict[str, Any] = field(default_factory=dict)
    # Every group that may see the card: the approver group and any escalation group.
    viewer_group_ids: tuple[int, ...] = ()
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


def card_event(change: RequestChange) -> str:
    """Whether a change puts a card on reviewers' screens, takes it off, or updates it."""
    if change.is_transition and change.to_state == State.PENDING_APPROVAL:
        return CARD_CREATED
    if change.is_transition and change.from_state == State.PENDING_APPROVAL:
        return CARD_REMOVED
    if change.verb == "request.escalated":
        return CARD_CREATED  # the escalation group has never seen this card: for its members it is new
    return CARD_UPDATED


def push_for(change: RequestChange) -> Change:
    """The card event for a committed domain change, addressed to everyone who sees the card."""
    details = dict(change.details)
    former_group_ids = tuple(details.pop("former_group_ids", ()))  # groups that just lost the card
    viewers = viewer_group_ids(change.request_id) if change.escalated else ()
    return Change(
        event=card_event(change),
        request_id=change.request_id,
        state=change.to_state,
        approver_group_id=change.approver_group_id,
        agent_id=change.agent_id,
        data={"verb": change.verb, **details},
        viewer_group_ids=tuple(sorted({*viewers, *former_group_ids})),
        new_request=change.from_state == State.DRAFT,
    )


def on_request_changed(sender, *, change: RequestChange, **kwargs: Any) -> None:
    """`request_changed` subscriber: push the card event."""
    _send_to_channel_layer(push_for(change))


def viewer_group_ids(request_id: str) -> tuple[int, ...]:
    """The groups holding any permission on one request (`request_id`: an existing request's
    str(pk), so it parses as its field would): whose screens may show it."""
    from .models import ApprovalRequestGroupObjectPermission

    return tuple(
        ApprovalRequestGroupObjectPermission.objects.filter(content_object_id=UUID(request_id))
        .values_list("group_id", flat=True)
        .distinct()
    )


ACCESS_REVOKED = "access.revoked"


def on_object_permission_deleted(sender, instance, **kwargs) -> None:
    """post_delete of a per-request permission (guardian): the card leaves the screens of
    whoever lost it, after commit, without closing anything else they have open."""
    group_id, user_id = getattr(instance, "group_id", None), getattr(instance, "user_id", None)
    if group_id is not None:
        target = approvers_group(group_id)
    elif user_id is not None:
        target = user_group(user_id)
    else:
        return  # a guardian permission row always names a group or a user: nobody lost anything
    request_id = str(instance.content_object_id)
    after_commit(lambda: push_lost_access(request_id, target), what=f"the lost access to {request_id}")


def push_lost_access(request_id: str, channel_group: str) -> None:
    """Tell one reviewer group's (or person's) screens that a card is no longer theirs."""
    change = Change(
        event=CARD_REMOVED,
        request_id=request_id,
        state="",
        approver_group_id=None,
        agent_id=0,
        data={"verb": ACCESS_REVOKED},
    )
    _send_to_channel_layer(change, groups=[channel_group])


def _send_to_channel_layer(change: Change, *, groups: list[str] | None = None) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": MESSAGE_TYPE, **asdict(change)}
    del message["new_request"]  # routing only

    async def send_all() -> None:
        for group in groups if groups is not None else change.channel_groups():
            try:
                await layer.group_send(group, message)
            except Exception:  # at-most-once by design: clients resync from REST
                logger.warning("could not push %s to %s", change.event, group, exc_info=True)

    push.run(change.event, send_all)
