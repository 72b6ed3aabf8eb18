"""A submission served by the site's ASGI application, on a loop asyncio runs (as
daphne serves it), answers without waiting for its push: the sync view hands the
push to the serving loop (approvals/push.py), which sends it after the 201.

The channel layer is a stand-in that holds every send until the answer is in, so
a view that waited for its push would never answer (the guard below fails it).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import HttpCommunicator

from approvals import broadcast

# Only a guard against the hang a blocking push would cause; nothing is timed.
HANG_GUARD_SECONDS = 20


class HeldLayer:
    def __init__(self) -> None:
        self.answered: asyncio.Event | None = None
        self.sent: list[tuple[str, str, bool]] = []  # (group, event, whether the answer was in)

    async def group_send(self, group: str, message: dict) -> None:
        await self.answered.wait()
        self.sent.append((group, message["event"], self.answered.is_set()))


@pytest.mark.django_db(transaction=True)
def test_a_submission_answers_before_its_push_is_sent(token, agent, monkeypatch):
    from controlplane.asgi import application

    layer = HeldLayer()
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    body = {
        "action_type": "send_email",
        "target": {"mailbox": "outbox"},
        "params": {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"},
        "run_id": "run-1",
        "tool_call_id": "call-1",
    }

    async def serve() -> tuple[int, bytes]:
        layer.answered = asyncio.Event()
        payload = json.dumps(body).encode()
        communicator = HttpCommunicator(
            application,
            "POST",
            "/api/v1/actions/",
            body=payload,
            headers=[
                (b"authorization", f"Bearer {token}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"host", b"testserver"),
            ],
        )
        response = await communicator.get_response(timeout=HANG_GUARD_SECONDS)
        layer.answered.set()
        if response["status"] != 201:
            return response["status"], response["body"]
        while not any(group == broadcast.agent_group(agent.pk) for group, _, _ in layer.sent):
            await asyncio.sleep(0.01)  # the drain task runs on this loop; the guard bounds a hang
        return response["status"], response["body"]

    status, answer = asyncio.run(asyncio.wait_for(serve(), HANG_GUARD_SECONDS))

    assert status == 201, answer
    assert (broadcast.agent_group(agent.pk), broadcast.CARD_CREATED, True) in layer.sent
    assert all(answered for _, _, answered in layer.sent)
