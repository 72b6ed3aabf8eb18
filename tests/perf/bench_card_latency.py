"""Submit-to-card latency: 50 reviewer sockets on `ws/reviewer/`, submissions over
HTTP to the same daphne process, time from sending `POST /api/v1/actions/` to the
`card.created` event arriving at each socket (p50/p95/p99 over every socket x
submission), paced at 100 submissions/s (the target), at 10/s (below one process's
submit capacity on 2 cores) and at saturation (32 clients, as fast as the server
answers). Sizes: 300 submissions per mode (20 and 5 sockets with --smoke).

Baseline, same run, same sockets: a `request.change` message of the same shape
sent by this process straight to the reviewers' `approvers-<group id>` group
through channels_redis (a bare Channels group_send round trip: no HTTP, no
classification, audit or database), paced and back to back in the same way.

Target (DESIGN.md): p99 under 100 ms with 50 reviewers connected at 100/s.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from importlib import import_module

from .common import SMOKE, Result, Server, django_setup, emit, fresh_database, manage, progress

REVIEWERS = 5 if SMOKE else 50
# The target's rate, and a rate one daphne process on 2 cores sustains (submit tops out near 18/s here).
RATES = (10, 100)
COUNT = 20 if SMOKE else 300
SATURATION_CLIENTS = 32
SETTLE_SECONDS = 20


def reviewer_sessions(count: int) -> tuple[list[str], int, int]:
    """`count` reviewer users with a live session each; returns (session keys, reviewers group id, agent id)."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.auth.models import Group

    from agents.models import Agent
    from approvals.permissions import REVIEWERS as REVIEWERS_GROUP

    group = Group.objects.get(name=REVIEWERS_GROUP)
    engine = import_module(settings.SESSION_ENGINE)
    keys = []
    for i in range(count):
        user = get_user_model().objects.create_user(f"bench-reviewer-{i}", password="unused-bench-pw")
        user.groups.add(group)
        session = engine.SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        keys.append(session.session_key)
    return keys, group.pk, Agent.objects.get(name="bench-agent").pk


def percentile(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


class Sockets:
    """The reviewer sockets and every `card.created` they receive: (request id, arrival time)."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[str, float]] = []
        self.connections: list = []
        self.readers: list[asyncio.Task] = []

    async def open(self, url: str, origin: str, cookie_name: str, keys: list[str]) -> None:
        from websockets.asyncio.client import connect

        for key in keys:
            # No client keepalive pings: under overload the pong waits behind thousands of
            # frames and the client would drop the socket, turning latency into loss.
            ws = await connect(
                url,
                origin=origin,
                additional_headers={"Cookie": f"{cookie_name}={key}"},
                max_queue=None,
                ping_interval=None,
            )
            self.connections.append(ws)
            self.readers.append(asyncio.create_task(self._read(ws)))

    async def _read(self, ws) -> None:
        async for raw in ws:
            message = json.loads(raw)
            if message.get("event") == "card.created":
                self.arrivals.append((message["request_id"], time.perf_counter()))

    async def wait_for(self, expected: int, timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while len(self.arrivals) < expected and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        for ws in self.connections:
            await ws.close()
        for task in self.readers:
            task.cancel()


def latencies(sockets: Sockets, sent: dict[str, float]) -> dict:
    values = sorted((arrived - sent[rid]) * 1000 for rid, arrived in sockets.arrivals if rid in sent)
    expected = len(sent) * len(sockets.connections)
    return {
        "sockets_open": sum(1 for ws in sockets.connections if ws.close_code is None),
        "p50_ms": round(percentile(values, 50), 2),
        "p95_ms": round(percentile(values, 95), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "max_ms": round(values[-1], 2) if values else None,
        "delivered": len(values),
        "expected": expected,
    }


async def run_submissions(server: Server, token: str, sockets: Sockets, *, rate: int | None) -> dict:
    """Submit COUNT actions (paced at `rate`/s, or with SATURATION_CLIENTS clients when None) and measure card arrival."""
    import httpx

    sockets.arrivals.clear()
    sent: dict[str, float] = {}
    statuses: dict[int, int] = {}

    async def one(client: httpx.AsyncClient, i: int) -> None:
        body = {
            "action_type": "send_email",
            "target": {"mailbox": "outbox"},
            "params": {"to": [f"user{i}@example.com"], "subject": "Weekly report"},
            "run_id": f"run-{i // 10}",
            "tool_call_id": f"call-{i}",
            "idempotency_key": str(uuid.uuid4()),
        }
        started = time.perf_counter()
        response = await client.post("/api/v1/actions/", json=body)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code in (200, 201):
            sent[response.json()["id"]] = started

    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, limits=limits, timeout=60
    ) as client:
        started = time.perf_counter()
        if rate:
            tasks = []
            for i in range(COUNT):
                delay = started + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(client, i)))
            await asyncio.gather(*tasks)
        else:
            queue = list(range(COUNT))

            async def worker() -> None:
                while queue:
                    await one(client, queue.pop())

            await asyncio.gather(*(worker() for _ in range(SATURATION_CLIENTS)))
        elapsed = time.perf_counter() - started
    await sockets.wait_for(len(sent) * len(sockets.connections), SETTLE_SECONDS)
    return {**latencies(sockets, sent), "submissions_per_s": round(COUNT / elapsed, 1), "statuses": statuses}


async def run_group_sends(group_id: int, agent_id: int, sockets: Sockets, *, rate: int | None) -> dict:
    """The baseline: COUNT request.change messages straight to the approvers group."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    sockets.arrivals.clear()
    sent: dict[str, float] = {}
    started = time.perf_counter()
    for i in range(COUNT):
        if rate:
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        request_id = str(uuid.uuid4())
        sent[request_id] = time.perf_counter()
        await layer.group_send(
            f"approvers-{group_id}",
            {
                "type": "request.change",
                "event": "card.created",
                "request_id": request_id,
                "state": "pending_approval",
                "approver_group_id": group_id,
                "agent_id": agent_id,
                "data": {"verb": "request.submitted"},
                "viewer_group_ids": [],
            },
        )
    elapsed = time.perf_counter() - started
    await sockets.wait_for(COUNT * len(sockets.connections), SETTLE_SECONDS)
    return {**latencies(sockets, sent), "messages_per_s": round(COUNT / elapsed, 1)}


def main() -> None:
    progress("fresh benchmark database")
    fresh_database()
    manage("seed_demo")
    token = manage("create_agent", "bench-agent", "-v", "0").strip()
    django_setup()
    from django.conf import settings

    keys, group_id, agent_id = reviewer_sessions(REVIEWERS)
    results: list[Result] = []
    with Server() as server:
        ws_url = f"ws://127.0.0.1:{server.port}/ws/reviewer/"

        async def scenario() -> dict:
            sockets = Sockets()
            await sockets.open(ws_url, server.url, settings.SESSION_COOKIE_NAME, keys)
            progress(f"{len(sockets.connections)} reviewer sockets connected")
            out = {}
            # Warm both paths (first requests import and compile).
            global COUNT
            measured, COUNT = COUNT, 10
            await run_submissions(server, token, sockets, rate=None)
            await run_group_sends(group_id, agent_id, sockets, rate=None)
            COUNT = measured
            for rate in (*RATES, None):
                label = f"{rate}/s" if rate else "saturation"
                progress(f"baseline group_send, {label}, {COUNT} messages")
                out[f"baseline {label}"] = await run_group_sends(group_id, agent_id, sockets, rate=rate)
                progress(f"submit-to-card, {label}, {COUNT} submissions")
                out[f"submit {label}"] = await run_submissions(server, token, sockets, rate=rate)
            await sockets.close()
            return out

        measured = asyncio.run(scenario())
    for label in (*(f"{rate}/s" for rate in RATES), "saturation"):
        submit, baseline = measured[f"submit {label}"], measured[f"baseline {label}"]
        for p in ("p50", "p95", "p99"):
            results.append(
                Result(
                    metric=f"submit-to-card {p}, {REVIEWERS} sockets, {label}",
                    value=submit[f"{p}_ms"],
                    unit="ms",
                    baseline=baseline[f"{p}_ms"],
                    baseline_name="bare group_send to the same sockets",
                    target="p99 < 100 ms at 100/s" if (p == "p99" and label == "100/s") else "",
                    details={"submit": submit, "baseline": baseline} if p == "p99" else {},
                )
            )
    emit("card_latency", results)


if __name__ == "__main__":
    main()
