"""Running a push (an awaitable send to the channel layer) from synchronous code.

A sync view under daphne does not wait for its push: the send goes to an
ordered, bounded queue drained on the server's event loop (`_LoopPusher`).
Everywhere else (Celery, commands, the embedded relay's senders, sync tests,
code under `async_to_sync`) the send has finished when `run` returns.

The server's loop is found through a context variable that `serving_pushes`
(wrapped around the site's ASGI application in `controlplane/asgi.py`) sets for
each connection; asgiref copies context variables into the threads that
`sync_to_async` runs sync views in, so those threads see it. No asgiref
internals are read.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync

__all__ = ["PUSH_QUEUE_LIMIT", "pushes_served_by_running_loop", "run", "serving_pushes"]

logger = logging.getLogger(__name__)

Send = Callable[[], Awaitable[None]]

# Pushes accepted for one loop and not yet sent; past this they are dropped, not
# queued: a stalled loop must not grow the web process's memory without bound.
PUSH_QUEUE_LIMIT = 10_000

_serving_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "push_serving_loop", default=None
)


@contextmanager
def pushes_served_by_running_loop() -> Iterator[None]:
    """Within this block (and the sync threads it starts), pushes go to the running
    loop's queue. Only for a loop that outlives the block's pushes, like a server's."""
    token = _serving_loop.set(asyncio.get_running_loop())
    try:
        yield
    finally:
        _serving_loop.reset(token)


def serving_pushes(application: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """ASGI middleware: the server's event loop takes the pushes of the sync code
    that `application` runs for each connection, instead of that code waiting for them."""

    async def serve(scope: dict, receive: Callable, send: Callable) -> Any:
        with pushes_served_by_running_loop():
            return await application(scope, receive, send)

    return serve


def run(event: str, send: Send) -> None:
    """Run `send` (named `event` in logs) on an event loop, at most once, never raising.

    From a sync thread that a serving loop started, it is queued on that loop in
    the order of the calls and this returns at once; from anywhere else it has run
    when this returns. On a loop's own thread nothing can be waited for: it is
    logged and dropped (clients resync from REST).
    """
    loop = _server_loop()
    if loop is not None:
        _pusher(loop).push(loop, event, send)
        return
    # One hop into the event loop for all the groups, not one per group.
    try:
        async_to_sync(send)()
    except RuntimeError:  # called from inside a running event loop: still at-most-once
        logger.warning("could not push %s: no way into the event loop from here", event, exc_info=True)


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The running serving loop this sync thread was called from, if any."""
    loop = _serving_loop.get()
    if loop is None:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return None  # on a loop thread: the blocking path reports why it cannot push
    if loop.is_closed() or not loop.is_running():
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
        self._queue: deque[tuple[str, Send]] = deque()  # touched on the loop thread only
        self._drain_task: asyncio.Task | None = None  # held so the running task is not garbage-collected

    def push(self, loop: asyncio.AbstractEventLoop, event: str, send: Send) -> None:
        """Queue `send` for the loop; never blocks and never raises into the caller."""
        with self._lock:
            if self._pending >= PUSH_QUEUE_LIMIT:
                self._dropped += 1
                if self._dropped == 1:
                    logger.warning(
                        "push queue full (%d): dropping pushes until the event loop catches up", PUSH_QUEUE_LIMIT
                    )
                return
            self._pending += 1
        try:
            loop.call_soon_threadsafe(self._accept, event, send)
        except RuntimeError:  # the loop closed since _server_loop looked
            self._sent()
            logger.warning("could not push %s: the event loop has stopped", event)

    def _accept(self, event: str, send: Send) -> None:
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
