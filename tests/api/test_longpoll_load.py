"""Hundreds of agents long-poll one daphne process at once: none holds a thread or
a database connection while it waits, and every one receives its decision.

The reviewers decide in this test process; the decisions reach daphne through
Redis (the channel layer that crosses processes), so this needs Redis.
Set LONGPOLL_CLIENTS to measure more (the issue note reports 500).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection

from agents.models import Agent
from agents.services import issue_token
from approvals import services
from approvals.states import Kind
from tests.execution.harness import wait_for
from tests.live import long_polls_held

CLIENTS = int(os.environ.get("LONGPOLL_CLIENTS", "200"))
# The loop's shared executor (cpu + 4 threads) and daphne's own; never one per poll.
THREAD_ALLOWANCE = 16


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def _connection_bound() -> int:
    """The most connections one server process may open: its pool's size, else one per thread."""
    from django.conf import settings

    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    return pool["max_size"] if isinstance(pool, dict) else THREAD_ALLOWANCE


def _database_connections() -> int:
    """Connections to the test database other than this test's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_hundreds_of_long_polls_hold_no_threads_or_connections(require_postgres, require_redis, daphne_server, people):
    # One agent (and token) per poller, as in production: the per-token rate limit never bites.
    pollers = []
    for i in range(CLIENTS):
        poller = Agent.objects.create(name=f"poller-{i}", owner=people["owen"])
        request = services.submit(
            services.Submission(kind=Kind.ACTION, action_type="send_email", params={"to": [f"p{i}@example.com"]}),
            agent=poller,
        )
        pollers.append((issue_token(poller).secret, str(request.pk)))
    idle_threads = _threads(daphne_server.process.pid)
    samples: dict[str, int] = {}

    async def scenario() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=CLIENTS + 10, max_keepalive_connections=CLIENTS + 10)
        async with httpx.AsyncClient(base_url=daphne_server.url, limits=limits, timeout=180) as client:
            polls = [
                asyncio.ensure_future(
                    client.get(
                        f"/api/v1/requests/{pk}/resume/",
                        params={"wait": 60},
                        headers={"Authorization": f"Bearer {secret}"},
                    )
                )
                for secret, pk in pollers
            ]
            # Arrival is a burst (each request briefly has a thread for Django's
            # middleware): wait until the server holds every poll, then until those
            # threads are gone again. The deadline only bounds a hung run.
            deadline = time.monotonic() + 20 + CLIENTS / 20
            samples["peak_threads_while_arriving"] = 0

            def every_poll_held() -> bool:
                threads = _threads(daphne_server.process.pid)
                samples["peak_threads_while_arriving"] = max(samples["peak_threads_while_arriving"], threads)
                return len(long_polls_held(pk for _, pk in pollers)) == CLIENTS

            def arrival_threads_gone() -> bool:
                samples["threads"] = _threads(daphne_server.process.pid)
                return samples["threads"] < idle_threads + THREAD_ALLOWANCE

            for condition, what in (
                (every_poll_held, f"the server to hold all {CLIENTS} polls"),
                (arrival_threads_gone, "the arrival threads to exit"),
            ):
                await asyncio.to_thread(
                    wait_for, condition, timeout=max(deadline - time.monotonic(), 0.1), interval=0.25, what=what
                )
            samples["db_connections"] = await asyncio.to_thread(_database_connections)
            early = [p.result() for p in polls if p.done()]
            assert not early, [(r.status_code, r.text) for r in early[:3]]
            started = time.monotonic()

            def decide(chunk: list[tuple[str, str]]) -> None:
                for _, pk in chunk:
                    services.reject(pk, revision=1, actor=services.Person(people["alice"]), feedback="not now")
                connection.close()

            await asyncio.gather(*(asyncio.to_thread(decide, pollers[i::4]) for i in range(4)))
            responses = await asyncio.gather(*polls)
            samples["decide_and_deliver_ms"] = int((time.monotonic() - started) * 1000)
            return responses

    responses = asyncio.run(scenario())
    print(f"\n{CLIENTS} long-polls: idle daphne threads {idle_threads}, while waiting {samples}")
    assert [r.status_code for r in responses] == [200] * CLIENTS
    assert all(r.json()["state"] == "rejected" and r.json()["resume_data"]["feedback"] == "not now" for r in responses)
    # Waiting holds neither a thread per poll nor a connection per poll.
    assert samples["threads"] < idle_threads + THREAD_ALLOWANCE, samples
    # The server's connections are bounded by its pool (which the burst of arriving polls
    # may fill while they authenticate), never one per poll.
    assert samples["db_connections"] <= _connection_bound() < CLIENTS, samples
