"""The after-commit push from a sync thread under a running ASGI loop (a sync
view under daphne) is handed to that loop's ordered queue instead of waited
for; everywhere else it is sent before the push call returns, as before.

Sync views are run the way Django's ASGI handler runs them: `sync_to_async`
from a coroutine on a loop that asyncio (not `async_to_sync`) runs, inside
`push.serving_pushes` as `controlplane/asgi.py` wraps the site. The channel
layer is a stand-in that records what reaches it, so no Redis is needed.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from approvals import broadcast, push

# Only a guard against hanging if a push blocks on a gate it is meant to run
# ahead of; the assertions never depend on how long anything takes.
DEADLOCK_GUARD_SECONDS = 10


class RecordingLayer:
    """Records each group_send; can hold sends until a gate opens, or fail some groups."""

    def __init__(self, *, gated: bool = False, failing: set[str] = frozenset()) -> None:
        self.sent: list[tuple[str, str]] = []  # (group, event)
        self.sent_after_caller_returned: list[bool] = []
        self.caller_returned = threading.Event()
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self.failing = failing

    async def group_send(self, group: str, message: dict) -> None:
        deadline = asyncio.get_running_loop().time() + DEADLOCK_GUARD_SECONDS
        while not self.gate.is_set() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)  # polled, so a loop that stops cancels this at once
        self.gate.set()  # a caller blocked on this send: fail once, not once per send
        if group in self.failing:
            raise ConnectionError(f"{group} is down")
        self.sent_after_caller_returned.append(self.caller_returned.is_set())
        self.sent.append((group, message["event"]))


@pytest.fixture
def layer(monkeypatch):
    def install(**options) -> RecordingLayer:
        recording = RecordingLayer(**options)
        monkeypatch.setattr(broadcast, "get_channel_layer", lambda: recording)
        return recording

    return install


def change(event: str, request_id: str = "r1", *, agent_id: int = 7, group_id: int = 3) -> broadcast.Change:
    return broadcast.Change(
        event=event, request_id=request_id, state="pending_approval", approver_group_id=group_id, agent_id=agent_id
    )


def push_all(changes: list[broadcast.Change], recording: RecordingLayer) -> None:
    """What a sync view's commit hooks do, then return the response."""
    for item in changes:
        broadcast._send_to_channel_layer(item)
    recording.caller_returned.set()


async def until_sent(recording: RecordingLayer, count: int) -> None:
    async def poll() -> None:
        while len(recording.sent) < count:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), DEADLOCK_GUARD_SECONDS)


def under_server_loop(
    changes: list[broadcast.Change], recording: RecordingLayer, *, sent: int, thread_sensitive: bool = True
) -> None:
    async def server() -> None:
        with push.pushes_served_by_running_loop():
            await sync_to_async(push_all, thread_sensitive=thread_sensitive)(changes, recording)
        recording.gate.set()
        await until_sent(recording, sent)

    asyncio.run(server())


def groups_of(*changes: broadcast.Change) -> list[tuple[str, str]]:
    return [(group, item.event) for item in changes for group in item.channel_groups()]


class TestFindingTheServerLoop:
    def test_a_sync_view_served_through_the_asgi_wrapper_finds_the_serving_loop(self):
        found: dict[str, object] = {}

        async def site(scope, receive, send) -> None:  # a sync view, run as Django's handler runs it
            found["loop"] = await sync_to_async(push._server_loop, thread_sensitive=True)()
            found["running"] = asyncio.get_running_loop()

        asyncio.run(push.serving_pushes(site)({"type": "http"}, None, None))

        assert found["loop"] is found["running"]

    def test_outside_a_serving_loop_there_is_none(self):
        assert push._server_loop() is None

        async def nested() -> object:
            return await sync_to_async(push._server_loop)()

        assert async_to_sync(nested)() is None
        assert asyncio.run(nested()) is None

    def test_the_loop_thread_itself_is_not_handed_a_queue(self):
        async def on_the_loop() -> object:
            with push.pushes_served_by_running_loop():
                return push._server_loop()

        assert asyncio.run(on_the_loop()) is None


class TestUnderARunningLoop:
    def test_the_view_returns_before_a_slow_layer_has_sent_anything(self, layer):
        recording = layer(gated=True)
        changes = [change(broadcast.CARD_CREATED)]

        under_server_loop(changes, recording, sent=len(groups_of(*changes)))

        # The layer held every send until the sync caller had returned.
        assert recording.sent_after_caller_returned == [True] * len(groups_of(*changes))

    @pytest.mark.parametrize("thread_sensitive", [True, False])
    def test_pushes_reach_the_layer_in_the_order_they_were_made(self, layer, thread_sensitive):
        recording = layer(gated=True)
        changes = [
            change(broadcast.CARD_CREATED, "r1"),
            change(broadcast.CARD_UPDATED, "r1"),
            change(broadcast.CARD_CREATED, "r2", group_id=4),
            change(broadcast.CARD_REMOVED, "r1"),
        ]

        under_server_loop(changes, recording, sent=len(groups_of(*changes)), thread_sensitive=thread_sensitive)

        assert recording.sent == groups_of(*changes)

    def test_pushes_from_several_threads_each_keep_their_order(self, layer):
        recording = layer()
        per_thread = {
            f"r{n}": [
                change(broadcast.CARD_CREATED, f"r{n}", agent_id=n),
                change(broadcast.CARD_UPDATED, f"r{n}", agent_id=n),
                change(broadcast.CARD_REMOVED, f"r{n}", agent_id=n),
            ]
            for n in range(8)
        }

        async def server() -> None:
            with push.pushes_served_by_running_loop():
                await asyncio.gather(
                    *(
                        sync_to_async(push_all, thread_sensitive=False)(changes, recording)
                        for changes in per_thread.values()
                    )
                )
            await until_sent(recording, sum(len(groups_of(*changes)) for changes in per_thread.values()))

        asyncio.run(server())

        for changes in per_thread.values():
            agent = broadcast.agent_group(changes[0].agent_id)
            assert [event for group, event in recording.sent if group == agent] == [
                broadcast.CARD_CREATED,
                broadcast.CARD_UPDATED,
                broadcast.CARD_REMOVED,
            ]

    def test_a_failing_group_is_logged_and_the_rest_still_go_out(self, layer, caplog):
        first, second = change(broadcast.CARD_CREATED, "r1"), change(broadcast.CARD_UPDATED, "r2", agent_id=8)
        recording = layer(failing={broadcast.agent_group(first.agent_id)})

        with caplog.at_level(logging.WARNING, logger=broadcast.__name__):
            under_server_loop([first, second], recording, sent=len(groups_of(first, second)) - 1)

        assert recording.sent == [
            sent for sent in groups_of(first, second) if sent[0] != broadcast.agent_group(first.agent_id)
        ]
        assert "could not push card.created to agent-7" in caplog.text

    def test_a_full_queue_drops_and_logs_instead_of_growing(self, layer, monkeypatch, caplog):
        monkeypatch.setattr(push, "PUSH_QUEUE_LIMIT", 2)
        recording = layer(gated=True)
        changes = [change(broadcast.CARD_CREATED, f"r{n}", agent_id=n) for n in range(5)]
        kept = changes[:2]

        with caplog.at_level(logging.WARNING, logger=push.__name__):
            under_server_loop(changes, recording, sent=len(groups_of(*kept)))

            async def a_later_push() -> None:  # the queue has room again once the layer caught up
                late = change(broadcast.CARD_UPDATED, "r0", agent_id=0)
                recording.caller_returned.clear()
                with push.pushes_served_by_running_loop():
                    await sync_to_async(push_all)([late], recording)
                await until_sent(recording, len(groups_of(*kept, late)))

            asyncio.run(a_later_push())

        assert {group for group, _ in recording.sent} >= {broadcast.agent_group(0), broadcast.agent_group(1)}
        assert not {group for group, _ in recording.sent} & {broadcast.agent_group(n) for n in (2, 3, 4)}
        assert "push queue full (2)" in caplog.text
        assert "after dropping 3 pushes" in caplog.text

    def test_pushes_left_when_the_loop_stops_are_dropped_quietly(self, layer):
        recording = layer(gated=True)

        async def server() -> None:
            with push.pushes_served_by_running_loop():
                await sync_to_async(push_all)([change(broadcast.CARD_CREATED)], recording)

        asyncio.run(server())  # returns with the push still held by the gate; the drain task is cancelled
        recording.gate.set()

        assert recording.sent == []


class TestElsewhereNothingChanges:
    def test_a_plain_sync_caller_has_sent_everything_when_it_returns(self, layer):
        recording = layer()
        changes = [change(broadcast.CARD_CREATED), change(broadcast.CARD_REMOVED)]

        push_all(changes, recording)

        assert recording.sent == groups_of(*changes)
        assert recording.sent_after_caller_returned == [False] * len(recording.sent)

    def test_a_sync_caller_under_async_to_sync_has_sent_everything_when_it_returns(self, layer):
        recording = layer()
        changes = [change(broadcast.CARD_CREATED), change(broadcast.CARD_REMOVED)]

        async def nested() -> None:
            await sync_to_async(push_all)(changes, recording)

        async_to_sync(nested)()

        assert recording.sent == groups_of(*changes)
        assert recording.sent_after_caller_returned == [False] * len(recording.sent)
