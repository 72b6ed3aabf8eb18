"""Submit throughput: `POST /api/v1/actions/` (classify + audit + push) against a
bare DRF create endpoint on a table of the same shape, both served by one daphne
process and driven by the same concurrent async clients.

Target (DESIGN.md): at least half the baseline's throughput (ratio >= 0.5).
"""

from __future__ import annotations

import asyncio
import uuid

from .common import SMOKE, Result, Server, emit, fresh_database, manage, post_concurrently, progress

CONCURRENCY = 32


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
        progress(f"baseline: {count} creates, {CONCURRENCY} clients")
        baseline = asyncio.run(
            post_concurrently(f"{server.url}/bench/baseline/", bodies(count), headers=headers, concurrency=CONCURRENCY)
        )
        progress(f"submit: {count} submissions, {CONCURRENCY} clients")
        submit = asyncio.run(
            post_concurrently(f"{server.url}/api/v1/actions/", bodies(count), headers=headers, concurrency=CONCURRENCY)
        )
    emit("submit", [
        Result(
            metric="submit throughput", value=round(submit.per_second, 1), unit="requests/s",
            baseline=round(baseline.per_second, 1), baseline_name="bare DRF create, same table shape",
            target="ratio >= 0.5", details={"submit": submit.summary(), "baseline": baseline.summary()},
        )
    ])


if __name__ == "__main__":
    main()
