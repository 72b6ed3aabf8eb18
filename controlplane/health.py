"""Health endpoints for load balancers and orchestrators.

- ``/healthz``: the process answers (liveness). No dependencies are touched.
- ``/readyz``: the database, the Celery broker and the channel layer are all
  reachable (readiness). JSON ``{"status": "ready" | "not_ready", "checks":
  {name: {"ok": bool, "ms": int, "error"?: str}}}``, HTTP 200 or 503. Each check
  is bounded by a short timeout, so a dead dependency makes it answer 503 in
  seconds rather than hang.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.db import connection
from django.http import HttpRequest, JsonResponse

CHECK_TIMEOUT_SECONDS = 3.0

__all__ = ["healthz", "readyz"]


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _broker() -> None:
    from controlplane.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT_SECONDS)
        # A virtual transport (the filesystem broker) "connects" without touching
        # anything: open a channel so its folders are actually reached.
        conn.default_channel.queue_declare(queue="celery", passive=False, durable=True)


async def _channel_layer_round_trip() -> None:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer is configured")
    channel = await layer.new_channel("readyz.")
    token = uuid.uuid4().hex
    await layer.send(channel, {"type": "readyz.ping", "token": token})
    message = await asyncio.wait_for(layer.receive(channel), timeout=CHECK_TIMEOUT_SECONDS)
    if message.get("token") != token:
        raise RuntimeError("the channel layer returned another message")


def _channel_layer() -> None:
    async_to_sync(_channel_layer_round_trip)()


CHECKS: dict[str, Callable[[], None]] = {
    "database": _database,
    "broker": _broker,
    "channel_layer": _channel_layer,
}


def readyz(request: HttpRequest) -> JsonResponse:
    results: dict[str, dict[str, Any]] = {}
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            check()
        except Exception as exc:  # any failure means "not ready", reported by name
            results[name] = {
                "ok": False,
                "ms": int((time.monotonic() - started) * 1000),
                "error": f"{type(exc).__name__}: {exc}"[:300],
            }
        else:
            results[name] = {"ok": True, "ms": int((time.monotonic() - started) * 1000)}
    ready = all(result["ok"] for result in results.values())
    return JsonResponse({"status": "ready" if ready else "not_ready", "checks": results}, status=200 if ready else 503)
