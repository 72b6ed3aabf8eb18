"""Canaries for controlplane/http/compat.py: one per library internal it reads.

Each fails when an upgrade of the library moves or changes the internal, so the
reach is revisited (or dropped) instead of silently doing nothing.
"""

from __future__ import annotations

import asyncio
import threading

from asgiref.sync import ThreadSensitiveContext, async_to_sync, sync_to_async

from controlplane.http import compat

# Only a guard against a hang; no assertion depends on how long anything takes.
JOIN_GUARD_SECONDS = 10


def _current_thread() -> threading.Thread:
    return threading.current_thread()


class TestReleaseRequestThread:
    def test_the_contexts_thread_exits_and_later_work_gets_a_fresh_one(self):
        async def request() -> tuple[threading.Thread, threading.Thread]:
            async with ThreadSensitiveContext():  # what Django's ASGI handler opens per request
                first = await sync_to_async(_current_thread)()
                compat.release_request_thread()
                second = await sync_to_async(_current_thread)()
                first.join(JOIN_GUARD_SECONDS)
                return first, second

        first, second = asyncio.run(request())

        assert not first.is_alive()
        assert second is not first

    def test_a_context_with_its_own_executor_keeps_it(self):
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as executor:

            async def request() -> tuple[threading.Thread, threading.Thread]:
                async with ThreadSensitiveContext(executor=executor):
                    first = await sync_to_async(_current_thread)()
                    compat.release_request_thread()
                    return first, await sync_to_async(_current_thread)()

            first, second = asyncio.run(request())

        assert second is first

    def test_outside_a_context_it_does_nothing(self):
        compat.release_request_thread()
        asyncio.run(sync_to_async(compat.release_request_thread)())


class TestHasParkedSyncCaller:
    def test_true_under_async_to_sync(self):
        async def view() -> bool:
            return compat.has_parked_sync_caller()

        assert async_to_sync(view)() is True

    def test_false_on_a_loop_no_sync_thread_waits_for(self):
        async def view() -> bool:
            return compat.has_parked_sync_caller()

        assert asyncio.run(view()) is False

    def test_the_parked_thread_is_where_thread_sensitive_calls_go(self):
        # Why the long-poll asks: a sync caller's data (its connection, its test
        # transaction) is on its own thread, and thread-sensitive calls reach it.
        caller = threading.current_thread()

        async def view() -> threading.Thread:
            return await sync_to_async(_current_thread, thread_sensitive=compat.has_parked_sync_caller())()

        assert async_to_sync(view)() is caller


class TestDaphneLeavesBodiesToDjango:
    def test_daphne_builds_its_requests_from_the_replaced_class(self):
        from daphne.http_protocol import HTTPFactory
        from twisted.web import http

        import controlplane.asgi  # noqa: F401  (applies it, as daphne's import of the application does)

        protocol = HTTPFactory(server=None).buildProtocol(None)
        request_class = protocol.requestFactory

        assert getattr(request_class, "leaves_bodies_to_django", False)
        assert issubclass(request_class, http.Request)
