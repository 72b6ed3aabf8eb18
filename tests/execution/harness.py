"""Real processes for execution tests: Celery workers on the test database and a
local webhook receiver that counts what it is sent.

Workers use the same broker as the test process: Redis when REDIS_URL is set (CI),
otherwise the embedded filesystem broker in CONTROLPLANE_VAR_DIR.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.live import ROOT, child_environment, stop_process

WORKER_LEASE_SECONDS = 3
_worker_count = 0


class Worker:
    """`celery -A controlplane worker` (solo pool: SIGKILL takes the whole worker)."""

    def __init__(self, **env: str) -> None:
        global _worker_count
        _worker_count += 1
        self.name = f"test{_worker_count}-{os.getpid()}@%h"
        var_dir = Path(os.environ.get("CONTROLPLANE_VAR_DIR", ROOT / "var"))
        self.log_path = var_dir / f"worker-{_worker_count}-{os.getpid()}.log"
        self._log = open(self.log_path, "wb")
        environment = child_environment(
            EXECUTION_LEASE_SECONDS=str(WORKER_LEASE_SECONDS),
            OUTBOUND_URL_ALLOWLIST="127.0.0.1",
            OUTBOUND_ALLOW_PRIVATE="1",
            **env,
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "controlplane",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "-n",
                self.name,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_until_ready()

    def _wait_until_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the worker exited early:\n{self.log()}")
            if " ready." in self.log():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the worker was not ready within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL, no goodbye: what an OOM killer or a pulled plug does."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._log.close()

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()


class Receiver:
    """An HTTP server on loopback that records every POST; `/hang` holds the answer
    until `release()`, so a worker can be caught mid-execution."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.arrived = threading.Event()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.posts.append({"path": self.path, "headers": dict(self.headers), "body": body})
                receiver.arrived.set()
                if self.path.startswith("/hang"):
                    receiver._release.wait(30)
                status = 302 if self.path.startswith("/redirect") else 200
                self.send_response(status)
                if status == 302:
                    self.send_header("Location", "http://127.0.0.1:9/")
                payload = json.dumps({"ok": True}).encode()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._release.set()

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def wait_for(
    predicate: Callable[[], object], *, timeout: float = 20.0, interval: float = 0.1, what: str = ""
) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
