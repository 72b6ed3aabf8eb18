"""Submit throughput: `POST /api/v1/actions/` (classify + audit + push) against a
bare DRF create endpoint on a table of the same shape, both served by one daphne
process and driven by the same concurrent async clients, in alternating rounds.

Target (DESIGN.md): at least half the baseline's throughput (ratio >= 0.5).

A second, steadier figure runs the same submissions in this process through
Django's test client (no HTTP server, one at a time, alternating with the
baseline so both see the same machine): the work per request in this process's
CPU time, and the queries per request. On a shared machine the HTTP throughput
swings with the neighbours' load; the in-process figures do much less.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from .common import (
    SMOKE,
    LoadResult,
    Result,
    Server,
    django_setup,
    emit,
    fresh_database,
    manage,
    post_concurrently,
    progress,
)

CONCURRENCY = 32
ROUNDS = 4


def bodies(count: int) -> list[dict]:
    return [
        {
            "action_type": "send_email",
            "target": {"mailbox": "outbox"},
            "params": {"to": [f"user{i}@example.com"], "subject": "Weekly report", "body": "Numbers attached."},
            "run_id": f"run-{i // 10}",
            "tool_call_id": f"call-{i}",
            "idempotency_key": str(uuid.uuid4()),
        }
        for i in range(count)
    ]


def main() -> None:
    count = 100 if SMOKE else 2000
    progress("fresh benchmark database")
    fresh_database()
    manage("seed_demo")
    token = manage("create_agent", "bench-agent", "-v", "0").strip()
    headers = {"Authorization": f"Bearer {token}"}
    with Server() as server:
        warm = bodies(50)
        asyncio.run(post_concurrently(f"{server.url}/bench/baseline/", warm, headers=headers, concurrency=8))
        asyncio.run(post_concurrently(f"{server.url}/api/v1/actions/", bodies(50), headers=headers, concurrency=8))
        # Alternating rounds, so that a change in the machine's load (it is shared)
        # reaches both sides alike instead of whichever happened to run then.
        runs: dict[str, list[LoadResult]] = {"baseline": [], "submit": []}
        urls = {"baseline": f"{server.url}/bench/baseline/", "submit": f"{server.url}/api/v1/actions/"}
        for round_number in range(1, ROUNDS + 1):
            for name in ("baseline", "submit"):
                progress(f"round {round_number}/{ROUNDS}, {name}: {count // ROUNDS} requests, {CONCURRENCY} clients")
                runs[name].append(
                    asyncio.run(
                        post_concurrently(urls[name], bodies(count // ROUNDS), headers=headers, concurrency=CONCURRENCY)
                    )
                )
        baseline, submit = combined(runs["baseline"]), combined(runs["submit"])
    progress(f"in-process: {count // 4} submissions and creates, alternating")
    in_process = measure_in_process(count // 4, headers)
    emit(
        "submit",
        [
            Result(
                metric="submit throughput",
                value=round(submit.per_second, 1),
                unit="requests/s",
                baseline=round(baseline.per_second, 1),
                baseline_name="bare DRF create, same table shape",
                target="ratio >= 0.5",
                details={"submit": submit.summary(), "baseline": baseline.summary()},
            ),
            Result(
                metric="submit in-process, requests per CPU second",
                value=round(1000 / in_process["submit"]["cpu_ms"], 1),
                unit="requests/CPU s",
                baseline=round(1000 / in_process["baseline"]["cpu_ms"], 1),
                baseline_name="bare DRF create, same client",
                details=in_process,
            ),
        ],
    )


def combined(results: list[LoadResult]) -> LoadResult:
    statuses: dict[int, int] = {}
    for result in results:
        for status, seen in result.statuses.items():
            statuses[status] = statuses.get(status, 0) + seen
    return LoadResult(
        sum(r.requests for r in results),
        sum(r.seconds for r in results),
        statuses,
        [latency for r in results for latency in r.latencies_ms],
    )


def measure_in_process(count: int, headers: dict) -> dict:
    """Per request, for submit and the baseline: wall ms, this process's CPU ms, queries."""
    django_setup()
    from django.db import connection
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=headers["Authorization"])
    totals = {name: {"wall": 0.0, "cpu": 0.0, "queries": 0} for name in ("submit", "baseline")}
    urls = {"submit": "/api/v1/actions/", "baseline": "/bench/baseline/"}
    current: dict = {}

    def count_query(execute, sql, params, many, context):
        current["queries"] += 1
        return execute(sql, params, many, context)

    for body in bodies(10):  # warm up: URL resolvers, imports, the policy cache, connections
        for name in ("baseline", "submit"):
            client.post(urls[name], data=json.dumps(body), content_type="application/json")
    with connection.execute_wrapper(count_query):
        for body in bodies(count):
            for name in ("baseline", "submit"):
                current["queries"] = 0
                wall, cpu = time.perf_counter(), time.process_time()
                response = client.post(urls[name], data=json.dumps(body), content_type="application/json")
                totals[name]["cpu"] += time.process_time() - cpu
                totals[name]["wall"] += time.perf_counter() - wall
                totals[name]["queries"] += current["queries"]
                if response.status_code != 201:
                    raise RuntimeError(f"{name}: HTTP {response.status_code} {response.content[:300]!r}")
    return {
        name: {
            "requests": count,
            "wall_ms": round(t["wall"] / count * 1000, 2),
            "cpu_ms": round(t["cpu"] / count * 1000, 2),
            "queries": round(t["queries"] / count, 1),
        }
        for name, t in totals.items()
    }


if __name__ == "__main__":
    main()
