"""Live push of request changes to reviewers' cards and waiting agents.

A subscriber of the domain signal `request_changed` (sent after commit, so a
rolled-back change never reaches a screen): each change becomes one card event
sent to the channel layer groups below. Channel messages are at-most-once hints:
clients resync from REST on (re)connect.

A sync view under daphne does not wait for its push: the message goes to an
ordered, bounded queue drained on the server's event loop (`_LoopPusher`).
Everywhere else (Celery, commands, the embedded relay's senders, sync tests,
code under `async_to_sync`) the push is sent before `_deliver` returns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from asgiref.sync import AsyncToSync, SyncToAsync, async_to_sync
from channels.layers import get_channel_layer

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
    viewers = _viewer_group_ids(change.request_id) if change.escalated else ()
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


def _viewer_group_ids(request_id: str) -> tuple[int, ...]:
    from .models import ApprovalRequestGroupObjectPermission

    return tuple(
        ApprovalRequestGroupObjectPermission.objects.filter(content_object_id=request_id)
        .values_list("group_id", flat=True)
        .distinct()
    )


def _send_to_channel_layer(change: Change) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": MESSAGE_TYPE, **asdict(change)}
    del message["new_request"]  # routing only

    async def send_all() -> None:
        for group in change.channel_groups():
            try:
                await layer.group_send(group, message)
            except Exception:  # at-most-once by design: clients resync from REST
                logger.warning("could not push %s to %s", change.event, group, exc_info=True)

    loop = _server_loop()
    if loop is not None:
        _pusher(loop).push(loop, change.event, send_all)
        return
    # One hop into the event loop for all the groups, not one per group.
    try:
        async_to_sync(send_all)()
    except RuntimeError:  # called from inside a running event loop: still at-most-once
        logger.warning("could not push %s: no way into the event loop from here", change.event, exc_info=True)


# Pushes accepted for one loop and not yet sent; past this they are dropped, not
# queued: a stalled loop must not grow the web process's memory without bound.
PUSH_QUEUE_LIMIT = 10_000


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The running ASGI event loop this sync thread was called from, if any.

    That is the loop `async_to_sync` would hop back to and block on: asgiref's
    SyncToAsync records it in a thread-local before running a sync view. Loops
    that `async_to_sync` itself created are left out: they stop (cancelling any
    queued push) as soon as their coroutine returns, so those callers keep the
    blocking hop. Anything unexpected (another asgiref layout) gives None, which
    is today's blocking path: slower, never wrong.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return None  # on a loop thread: the blocking path reports why it cannot push
    local = getattr(SyncToAsync, "threadlocal", None)
    loop = getattr(local, "main_event_loop", None)
    if not isinstance(loop, asyncio.AbstractEventLoop) or getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    if loop.is_closed() or not loop.is_running():
        return None
    if loop in getattr(AsyncToSync, "loop_thread_executors", {}):
        return None
    return loop


class _LoopPusher:
    """One event loop's pushes, sent in the order they were made, one at a time.

    Sync threads hand each push over with `call_soon_threadsafe` and return at
    once; callbacks run in FIFO order on the loop, and a single drain task sends
    the queued pushes one after the other, so a request's submitted and decided
    events cannot swap. The drain task exits when the queue is empty (and is
    started again by the next push), so no idle task is left on a loop that
    stops. Pushes still queued when the loop stops are dropped: at-most-once,
    clients resync from REST on reconnect.
    """

    def __init__(self) -> None:
        # No reference to the loop itself: the registry is keyed weakly by it.
        self._lock = threading.Lock()
        self._pending = 0  # handed over and not yet sent, so the bound also covers the loop's own callback queue
        self._dropped = 0
        self._queue: deque[tuple[str, Callable[[], Awaitable[None]]]] = deque()  # touched on the loop thread only
        self._drain_task: asyncio.Task | None = None  # held so the running task is not garbage-collected

    def push(self, loop: asyncio.AbstractEventLoop, event: str, send: Callable[[], Awaitable[None]]) -> None:
        """Queue `send` for the loop; never blocks and never raises into the caller."""
        with self._lock:
            if self._pending >= PUSH_QUEUE_LIMIT:
                self._dropped += 1
                if self._dropped == 1:
                    logger.warning("push queue full (%d): dropping pushes until the event loop catches up",
                                   PUSH_QUEUE_LIMIT)
                return
            self._pending += 1
        try:
            loop.call_soon_threadsafe(self._accept, event, send)
        except RuntimeError:  # the loop closed since _server_loop looked
            self._sent()
            logger.warning("could not push %s: the event loop has stopped", event)

    def _accept(self, event: str, send: Callable[[], Awaitable[None]]) -> None:
        self._queue.append((event, send))
        if self._drain_task is None:
            self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._queue:
                event, send = self._queue.popleft()
                try:
                    await send()
                except Exception:  # send() logs per group; anything else must not stop the queue
                    logger.warning("could not push %s", event, exc_info=True)
                finally:
                    self._sent()
        finally:
            self._drain_task = None  # no await since the queue was seen empty: a new push starts a new drain

    def _sent(self) -> None:
        with self._lock:
            self._pending -= 1
            dropped, self._dropped = self._dropped, 0
        if dropped:
            logger.warning("push queue had room again after dropping %d pushes", dropped)


_pushers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPusher] = weakref.WeakKeyDictionary()
_pushers_lock = threading.Lock()


def _pusher(loop: asyncio.AbstractEventLoop) -> _LoopPusher:
    with _pushers_lock:
        pusher = _pushers.get(loop)
        if pusher is None:
            pusher = _pushers[loop] = _LoopPusher()
        return pusher
