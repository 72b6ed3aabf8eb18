"""The embedded default across processes: daphne with the in-memory layer, a
separate Celery worker on the filesystem broker relaying its changes over
loopback. A request the worker executes updates an open reviewer socket, and a
request the sweeper expires reaches both the socket and the agent's long-poll
(which waits only while a request is pending, so the sweeper's expiry is the one
worker-side change it can wait for).

The children run the embedded settings (no REDIS_URL) on this run's test
database, whatever broker the test process itself uses, so CI exercises the
embedded path too.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
import websockets
from celery import Celery
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.utils import timezone

from agents.services import issue_token
from approvals.models import ApprovalRequest
from approvals.states import State
from tests.live import DaphneServer, child_environment

from .harness import Worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def embedded(tmp_path: Path):
    """daphne + one worker, embedded settings, sharing a fresh filesystem broker."""
    # The embedded default URL (settings.EMBEDDED_BROKER_URL), as `make run` uses it.
    env = {"REDIS_URL": "", "CELERY_BROKER_URL": "", "CELERY_BROKER_DIR": str(tmp_path / "broker")}
    server = DaphneServer(env=child_environment(**env))
    worker = Worker(CHANNEL_RELAY_URL=server.url, **env)
    producer = Celery("embedded-test", broker=django_settings.EMBEDDED_BROKER_URL, set_as_current=False)
    producer.conf.broker_transport_options = {
        "data_folder_in": str(tmp_path / "broker" / "queue"),
        "data_folder_out": str(tmp_path / "broker" / "queue"),
        "control_folder": str(tmp_path / "broker" / "control"),
    }
    yield server, worker, producer
    worker.stop()
    server.stop()


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


def test_worker_and_sweeper_changes_reach_the_reviewer_socket_and_the_waiting_agent(
    embedded, approved, ops_submit, reviewer_alice, ops_bot
):
    server, worker, producer = embedded
    token = issue_token(ops_bot).secret
    executed = approved("demo_restart_service", {"service": "search"})
    waiting = ops_submit("update_document", {"content": "v2"}, {"document": "guide.md"})
    cookie = session_cookie(reviewer_alice)
    long_poll: dict = {}

    def agent_waits() -> None:
        call = urllib.request.Request(
            f"{server.url}/api/v1/requests/{waiting.pk}/resume/?wait=20", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(call, timeout=30) as response:
            long_poll.update(json.load(response))

    def deadline_passes() -> None:
        """Move the decision deadline into the past (the worker's sweeper reads it from the row)
        instead of waiting for the clock to reach it."""
        try:
            ApprovalRequest.objects.filter(pk=waiting.pk).update(decide_by=timezone.now() - timedelta(seconds=1))
        finally:
            connection.close()

    async def reviewer_watches() -> list[dict]:
        events: list[dict] = []
        async with websockets.connect(
            f"{server.ws_url}/ws/reviewer/", origin=server.url, additional_headers={"Cookie": cookie}
        ) as socket:

            async def until_pushed(pk, state: str) -> None:
                while not any(e.get("request_id") == str(pk) and e.get("state") == state for e in events):
                    events.append(json.loads(await asyncio.wait_for(socket.recv(), timeout=20)))

            poller = threading.Thread(target=agent_waits)
            poller.start()
            producer.send_task("approvals.execute_request", args=[str(executed.pk)])
            await until_pushed(executed.pk, State.SUCCEEDED)
            await asyncio.to_thread(deadline_passes)
            producer.send_task("approvals.expire_overdue")  # what beat sends
            await until_pushed(waiting.pk, State.EXPIRED)
            await asyncio.to_thread(poller.join, 25)
        return events

    events = asyncio.run(reviewer_watches())
    assert {(e["request_id"], e["state"]) for e in events} >= {
        (str(executed.pk), State.SUCCEEDED),
        (str(waiting.pk), State.EXPIRED),
    }
    assert long_poll["state"] == State.EXPIRED, long_poll
    assert ApprovalRequest.objects.get(pk=waiting.pk).resolution_code == "decision_deadline_passed"
