"""Scale-out: two daphne processes and two Celery workers sharing one PostgreSQL and
one Redis behave as one control plane.

A reviewer whose socket is on process A sees the card for a submission made
through process B; approving through A's API wakes the agent long-polling on B;
the approved webhook is delivered exactly once although both workers receive
deliveries of its task.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from approvals.execution.tasks import execute_request
from approvals.models import ApprovalRequest
from approvals.states import State
from controlplane.celery import app as celery_app
from tests.execution.conftest import receiver  # noqa: F401 (a fixture: the webhook receiver)
from tests.execution.harness import Worker, wait_for
from tests.live import DaphneServer, child_environment, long_polls_held

from .conftest import cookie_header, csrf_headers, session_cookies

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LOOPBACK_OUTBOUND = {"OUTBOUND_URL_ALLOWLIST": "127.0.0.1", "OUTBOUND_ALLOW_PRIVATE": "1"}


@pytest.fixture
def cluster(services_up, django_db_blocker):
    """Two web processes and two workers, stopped afterwards whatever happens."""
    started: list = []
    # Earlier tests approve calls with no worker running; their tasks wait in the broker and
    # would be counted here as deliveries of this test's task.
    celery_app.control.purge()
    try:
        with django_db_blocker.unblock():
            for _ in range(2):
                started.append(DaphneServer(env=child_environment(**LOOPBACK_OUTBOUND)))
            for _ in range(2):
                started.append(Worker())
        yield started
    finally:
        for process in reversed(started):
            process.stop()


def test_two_web_processes_and_two_workers_act_as_one(cluster, people, token, receiver):
    server_a, server_b, worker_1, worker_2 = cluster
    cookies = session_cookies(people["alice"])
    agent_headers = {"Authorization": f"Bearer {token}"}

    async def scenario() -> tuple[dict, dict, dict]:
        async with (
            websockets.connect(
                f"{server_a.ws_url}/ws/reviewer/",
                origin=server_a.url,
                additional_headers={"Cookie": cookie_header(cookies)},
                open_timeout=10,
            ) as reviewer_socket,
            httpx.AsyncClient(timeout=30) as http,
        ):
            submitted = await http.post(
                f"{server_b.url}/api/v1/actions/",
                headers=agent_headers,
                json={
                    "action_type": "notify_webhook",
                    "target": {"url": f"{receiver.url}/hooks/scale"},
                    "params": {"text": "deployed"},
                },
            )
            assert submitted.status_code == 201, submitted.text
            request_id = submitted.json()["id"]
            assert submitted.json()["state"] == State.PENDING_APPROVAL

            card = json.loads(await asyncio.wait_for(reviewer_socket.recv(), timeout=10))

            # The agent waits on B: B holds its long-poll (in the request's group) before A decides.
            waiting = asyncio.create_task(
                http.get(f"{server_b.url}/api/v1/requests/{request_id}/resume/?wait=20", headers=agent_headers)
            )
            await asyncio.to_thread(wait_for, lambda: long_polls_held([request_id]), what="B to hold the long-poll")
            assert not waiting.done()
            decided = await http.post(
                f"{server_a.url}/api/v1/requests/{request_id}/decisions/",
                headers=csrf_headers(cookies),
                json={"decision": "approve", "revision": 1},
            )
            assert decided.status_code == 200, decided.text
            resumed = await asyncio.wait_for(waiting, timeout=10)
            assert resumed.status_code == 200, resumed.text
            return card, resumed.json(), decided.json()

    card, resumed, decided = asyncio.run(scenario())
    request = ApprovalRequest.objects.get()
    assert card["event"] == "card.created" and card["request_id"] == str(request.pk)
    assert decided["state"] in {State.APPROVED, State.EXECUTING, State.SUCCEEDED}
    assert resumed["decided"] and resumed["resume_data"]["action"] == "approved"

    # Extra deliveries of the same task land on both workers; the side effect still happens once.
    for _ in range(4):
        execute_request.delay(str(request.pk))
    wait_for(lambda: ApprovalRequest.objects.get(pk=request.pk).state == State.SUCCEEDED, what="the webhook to succeed")

    def logs() -> str:
        return worker_1.log() + worker_2.log()

    wait_for(lambda: logs().count("] received") == 5, what="all five deliveries to be consumed")
    wait_for(lambda: logs().count("succeeded in") == 5, what="all five deliveries to finish")
    assert logs().count("s: 'succeeded'") == 1  # one delivery executed; the others were refused or skipped
    assert len(receiver.posts) == 1
    assert receiver.posts[0]["headers"]["Idempotency-Key"] == ApprovalRequest.objects.get(pk=request.pk).execution_key
