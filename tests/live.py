"""A real daphne server on the test database, for tests that meet the app the way
users do (HTTP and WebSocket over a socket, a separate process).

Tests using it must see committed data, so they take `transactional_db`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for_tests() -> str:
    """The URL of the database the test run created, for child processes."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(settings['NAME']).resolve()}"
    user = settings.get("USER") or ""
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{settings.get('HOST') or '127.0.0.1'}:{settings.get('PORT') or 5432}/{settings['NAME']}"


def child_environment(**extra: str) -> dict[str, str]:
    """Environment for a server or worker process that shares this test run's database."""
    env = dict(os.environ)
    # Browser tests lift Django's async-safety check in this process only (tests/browser/conftest.py).
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    # Transactional tests flush and re-seed the database under the child (approvals/apps.py).
    env["CONTROLPLANE_DATABASE_FLUSHED_UNDER_US"] = "1"
    env.update(DATABASE_URL=database_url_for_tests(), DJANGO_SETTINGS_MODULE="controlplane.settings", **extra)
    # The audit key this process signs with now (a test may have set its own): the child
    # appends to the same chain, which refuses rows from a key it has moved past.
    from django.conf import settings

    env.update(
        AUDIT_SIGNING_KEY=settings.AUDIT_SIGNING_KEY, AUDIT_PREVIOUS_SIGNING_KEY=settings.AUDIT_PREVIOUS_SIGNING_KEY
    )
    return env


def stop_process(process: subprocess.Popen, *, grace: float = 10.0) -> None:
    """Terminate `process`, and kill it if it has not exited after `grace` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class DaphneServer:
    """daphne serving controlplane.asgi on a free loopback port until `stop()`."""

    def __init__(self, *, env: dict[str, str] | None = None, port: int | None = None) -> None:
        # A fixed `port` restarts a server where its clients expect it (tests/scale/test_faults.py).
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("CONTROLPLANE_VAR_DIR", ROOT / "var")) / f"daphne-{self.port}.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "controlplane.asgi:application"],
            cwd=ROOT,
            env=env or child_environment(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()

    def _wait_until_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited early:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"daphne did not answer /healthz within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()


def long_polls_held(request_ids: Iterable[str]) -> set[str]:
    """Those of `request_ids` that a server, in any process, holds a long-poll on.

    A waiting poll joins its request's channel group before it reads the request, so
    once a request is in this set a decision on it reaches the poll whichever comes
    first: this is what a test waits for instead of sleeping "until the agent waits".
    channels_redis keeps each group as the sorted set `<prefix>:group:<name>` of its
    channels; reading those needs the Redis channel layer (REDIS_URL), as every
    multi-process test has.
    """
    import redis
    from channels.layers import get_channel_layer
    from django.conf import settings

    from approvals.broadcast import request_group

    layer = get_channel_layer()
    if not settings.REDIS_URL or not hasattr(layer, "prefix"):
        raise RuntimeError("long_polls_held reads the Redis channel layer; set REDIS_URL")
    ids = [str(request_id) for request_id in request_ids]
    with redis.Redis.from_url(settings.REDIS_URL) as client, client.pipeline(transaction=False) as pipeline:
        for request_id in ids:
            pipeline.zcard(f"{layer.prefix}:group:{request_group(request_id)}")
        members = pipeline.execute()
    return {request_id for request_id, count in zip(ids, members) if count}
