"""Faults: the test's own Redis restarts under a connected reviewer, and daphne
restarts under an agent that is long-polling through the Python client.

Redis here is a private `redis-server` on a free loopback port (never the
machine's shared one), so restarting it disturbs nobody else. SIGKILL of a worker
mid-execution is covered by tests/execution/test_worker_crash.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading

import httpx
import pytest
import redis
import websockets

from approvals import services
from approvals.models import ApprovalRequest
from hitl_controlplane.client import ControlPlane
from tests.execution.harness import wait_for
from tests.fixtures.revisions import current_revision
from tests.live import DaphneServer, child_environment, free_port, long_polls_held

from .conftest import cookie_header, session_cookies

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class PrivateRedis:
    """`redis-server` on a free loopback port, no persistence: a restart loses
    everything, as a crashed cache or channel-layer node would."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, timeout=10, what="the private redis-server to answer")

    def _answers(self) -> bool:
        try:
            return redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis(services_up):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed, so the test cannot run a Redis of its own")
    server = PrivateRedis()
    yield server
    server.stop()


def submit(token: str, url: str, doc: str) -> str:
    response = httpx.post(
        f"{url}/api/v1/actions/",
        headers={"Authorization": f"Bearer {token}"},
        json={"action_type": "update_document", "target": {"doc": doc}, "params": {"text": doc}},
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_reviewer_reconnects_and_resyncs_after_redis_restarts(private_redis, django_db_blocker, people, token):
    with django_db_blocker.unblock():
        server = DaphneServer(env=child_environment(REDIS_URL=private_redis.url))
    cookies = session_cookies(people["alice"])
    headers = {"Cookie": cookie_header(cookies)}

    async def resync(http: httpx.AsyncClient) -> set[str]:
        """What queue.js does on every (re)connect: ask REST what the queue holds."""
        answer = await http.get(f"{server.url}/queue/sync.json", headers=headers)
        assert answer.status_code == 200, answer.text
        return {card["id"] for card in answer.json()["cards"]}

    async def connect():
        return await websockets.connect(
            f"{server.ws_url}/ws/reviewer/", origin=server.url, additional_headers=headers, open_timeout=5
        )

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            socket = await connect()
            before = await asyncio.to_thread(submit, token, server.url, "before")
            assert json.loads(await asyncio.wait_for(socket.recv(), 10))["request_id"] == before

            private_redis.stop()
            # Submissions go on during the outage: the database is the truth, the push is a hint.
            during = await asyncio.to_thread(submit, token, server.url, "during")
            private_redis.start()

            # The server closes the deaf socket; the client reconnects (with backoff) and resyncs.
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(socket.recv(), 15)
            for attempt in range(20):
                try:
                    socket = await connect()
                    break
                except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake):
                    await asyncio.sleep(0.25 * (attempt + 1))
            assert {before, during} <= await resync(http)

            # And the new socket is live again.
            after = await asyncio.to_thread(submit, token, server.url, "after")
            assert json.loads(await asyncio.wait_for(socket.recv(), 10))["request_id"] == after
            await socket.close()

    try:
        asyncio.run(scenario())
    finally:
        server.stop()
    assert ApprovalRequest.objects.count() == 3


def test_the_client_retries_through_a_daphne_restart_and_gets_its_decision(
    services_up, django_db_blocker, people, token
):
    with django_db_blocker.unblock():
        server = DaphneServer()
    port = server.port
    outcome: dict = {}
    try:
        with ControlPlane(server.url, token, poll_wait=5, retries=8, retry_backoff=0.25) as cp:
            submitted = cp.submit_action("update_document", {"doc": "handbook"}, {"text": "v2"})
            waiter = threading.Thread(target=lambda: outcome.update(resume=cp.wait(submitted["id"], timeout=40)))
            waiter.start()
            wait_for(lambda: long_polls_held([submitted["id"]]), what="the server to hold the agent's long-poll")
            server.stop()  # the poll's connection dies with the process
            services.approve(
                submitted["id"], revision=current_revision(submitted["id"]), actor=services.Person(people["alice"])
            )  # decided while the server is down
            with django_db_blocker.unblock():
                server = DaphneServer(port=port)
            waiter.join(timeout=45)
    finally:
        server.stop()
    assert outcome["resume"].request_id == submitted["id"] and outcome["resume"].approved
    assert ApprovalRequest.objects.count() == 1
