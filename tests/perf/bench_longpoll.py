"""500 agents long-polling one daphne process at once (`GET /api/v1/requests/<id>/resume/?wait=60`):
the process's memory (RSS), threads and the bench database's connections while
every poll waits, then every request is rejected from this process and each poll
must receive its decision (through Redis, the channel layer that crosses processes).

Baseline: the same daphne process idle, just before the polls arrive. One agent
and token per poller, as in production. The approach of tests/api/test_longpoll_load.py
(which asserts the same at 200 pollers in the test suite).

Target (DESIGN.md): 500 agents long-polling at once on one server process without
exhausting database connections.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from .common import BENCH_DB, SMOKE, Result, Server, django_setup, emit, fresh_database, manage, progress

CLIENTS = 20 if SMOKE else 500


def proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for {pid}")


def database_connections() -> int:
    """Connections to the bench database other than this process's own."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [BENCH_DB]
        )
        count = cursor.fetchone()[0]
    connection.close()
    return count


def pollers(count: int) -> tuple[list[tuple[str, str]], object]:
    from django.contrib.auth import get_user_model

    from agents.models import Agent
    from agents.services import issue_token
    from approvals import services
    from approvals.states import Kind

    owner = get_user_model().objects.get(username="agent-owner")
    out = []
    for i in range(count):
        agent = Agent.objects.create(name=f"poller-{i}", owner=owner)
        request = services.submit(
            services.Submission(kind=Kind.ACTION, action_type="send_email", params={"to": [f"p{i}@example.com"]}),
            agent=agent,
        )
        out.append((issue_token(agent).secret, str(request.pk)))
    return out, get_user_model().objects.get(username="reviewer")


def main() -> None:
    progress("fresh benchmark database")
    fresh_database()
    manage("seed_demo")
    django_setup()
    progress(f"{CLIENTS} agents, tokens and pending requests")
    polls, reviewer = pollers(CLIENTS)
    with Server() as server:
        pid = server.process.pid
        time.sleep(1)
        idle = {
            "rss_mib": proc_status(pid, "VmRSS") / 1024,
            "threads": proc_status(pid, "Threads"),
            "db_connections": database_connections(),
        }
        waiting: dict = {}

        async def scenario() -> tuple[list, float]:
            import httpx

            from approvals import services

            limits = httpx.Limits(max_connections=CLIENTS + 10, max_keepalive_connections=CLIENTS + 10)
            async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=180) as client:
                tasks = [
                    asyncio.ensure_future(
                        client.get(
                            f"/api/v1/requests/{pk}/resume/",
                            params={"wait": 60},
                            headers={"Authorization": f"Bearer {secret}"},
                        )
                    )
                    for secret, pk in polls
                ]
                # Arrival is a burst (each poll briefly has a thread for Django's middleware);
                # sample once the threads have settled back near idle, i.e. every poll is waiting.
                started, peak = time.monotonic(), 0
                while time.monotonic() < started + 20 + CLIENTS / 20:
                    await asyncio.sleep(0.25)
                    threads = proc_status(pid, "Threads")
                    peak = max(peak, threads)
                    if time.monotonic() > started + 3 and threads < idle["threads"] + 16:
                        break
                await asyncio.sleep(1)
                waiting.update(
                    rss_mib=proc_status(pid, "VmRSS") / 1024,
                    threads=proc_status(pid, "Threads"),
                    peak_threads_while_arriving=peak,
                    db_connections=await asyncio.to_thread(database_connections),
                    answered_early=sum(t.done() for t in tasks),
                )
                decided = time.monotonic()

                def decide(chunk: list[tuple[str, str]]) -> None:
                    from django.db import connection

                    for _, pk in chunk:
                        services.reject(pk, revision=1, actor=services.Person(reviewer), feedback="not now")
                    connection.close()

                await asyncio.gather(*(asyncio.to_thread(decide, polls[i::4]) for i in range(4)))
                responses = await asyncio.gather(*tasks, return_exceptions=True)
                return responses, time.monotonic() - decided

        responses, deliver_seconds = asyncio.run(scenario())
        waiting["peak_rss_mib"] = proc_status(pid, "VmHWM") / 1024
    got = sum(
        1
        for r in responses
        if not isinstance(r, Exception) and r.status_code == 200 and r.json().get("state") == "rejected"
    )
    details = {"idle": idle, "waiting": waiting, "decide_and_deliver_s": round(deliver_seconds, 2), "clients": CLIENTS}
    emit(
        "longpoll",
        [
            Result(
                f"daphne RSS, {CLIENTS} polls waiting",
                round(waiting["rss_mib"], 1),
                "MiB",
                baseline=round(idle["rss_mib"], 1),
                baseline_name="same process idle",
                details=details,
            ),
            Result(
                f"daphne threads, {CLIENTS} polls waiting",
                waiting["threads"],
                "threads",
                baseline=idle["threads"],
                baseline_name="same process idle",
                target="no thread per poll",
            ),
            Result(
                f"bench DB connections, {CLIENTS} polls waiting",
                waiting["db_connections"],
                "connections",
                baseline=idle["db_connections"],
                baseline_name="same process idle",
                target="not exhausted (no connection per poll)",
            ),
            Result(
                "polls that got their decision",
                got,
                "polls",
                baseline=CLIENTS,
                baseline_name="polls started",
                target="all (ratio 1.0)",
                details={"decide_and_deliver_s": round(deliver_seconds, 2)},
            ),
        ],
    )


if __name__ == "__main__":
    main()
