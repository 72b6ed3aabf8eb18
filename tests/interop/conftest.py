"""Interop tests: agent frameworks' own hosts, run for real against a real daphne.

The Mastra hosts are Node scripts (tests/interop/mastra/*.mjs) with a pinned
package-lock. `npm ci` runs once per session here (node_modules is not in git); with
no `node` the tests skip with the reason printed, and under REQUIRE_SERVICES=1 (CI)
they fail instead. The current @mastra/core declares Node >= 22.13; these paths run on
Node 20 (Debian's) too, so npm is told not to refuse on the engine field.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret
from django.test import Client

from tests.fixtures.services import missing_service

MASTRA = Path(__file__).resolve().parent / "mastra"
# Bounds how long a broken host can hang a test; no assertion depends on timing.
HANG_GUARD_SECONDS = 120


def _npm_ci(folder: Path) -> None:
    """`npm ci` unless node_modules was installed from this very lockfile."""
    lock = hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()
    stamp = folder / "node_modules" / ".installed-from-lock"
    if stamp.exists() and stamp.read_text() == lock:
        return
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--engine-strict=false"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.fail(f"npm ci in {folder} failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    stamp.write_text(lock)


@pytest.fixture(scope="session")
def mastra_host() -> Path:
    """tests/interop/mastra with its packages installed: the folder to run hosts in."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        missing_service("the Mastra interop tests need node and npm (.ci/run installs Debian's)")
    _npm_ci(MASTRA)
    return MASTRA


class Host:
    """A host script running as its own process; it reports JSON lines (`emit` in
    controlplane.mjs) that `next_event` reads in order."""

    def __init__(self, folder: Path, script: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["node", script],
            cwd=folder,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def next_event(self, name: str) -> dict:
        try:
            line = self._lines.get(timeout=HANG_GUARD_SECONDS)
        except queue.Empty:
            self.stop()
            raise AssertionError(f"the host sent nothing; stderr:\n{''.join(self._stderr)}") from None
        if line is None:
            self.process.wait()
            raise AssertionError(
                f"the host exited ({self.process.returncode}) before {name!r}; stderr:\n{''.join(self._stderr)}"
            )
        event = json.loads(line)
        assert event["event"] == name, event
        return event

    def finish(self) -> int:
        code = self.process.wait(timeout=HANG_GUARD_SECONDS)
        assert code == 0, "".join(self._stderr)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def run_host(mastra_host, daphne_server, token):
    """`run_host(script, **env)`: start a Mastra host talking to daphne as mail-bot."""
    started: list[Host] = []

    def _run(script: str, **env: str) -> Host:
        host = Host(mastra_host, script, {"CONTROLPLANE_URL": daphne_server.url, "CONTROLPLANE_TOKEN": token, **env})
        started.append(host)
        return host

    yield _run
    for host in started:
        host.stop()


@pytest.fixture
def decide(daphne_server, people):
    """`decide(reviewer, request_id, body)`: POST the reviewer API's decisions/ over HTTP
    with a signed-in session and its CSRF token, as the reviewer's browser would."""
    import urllib.error
    import urllib.request

    def _decide(reviewer: str, request_id: str, body: dict) -> dict:
        from tests.fixtures.revisions import current_revision

        body = {"revision": current_revision(request_id), **body}  # the revision it is at, unless named
        client = Client()
        client.force_login(people[reviewer])
        csrf = _get_new_csrf_string()
        cookies = (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}; "
            f"{settings.CSRF_COOKIE_NAME}={csrf}"
        )
        request = urllib.request.Request(
            f"{daphne_server.url}/api/v1/requests/{request_id}/decisions/",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Cookie": cookies, "X-CSRFToken": _mask_cipher_secret(csrf)},
        )
        try:
            with urllib.request.urlopen(request, timeout=HANG_GUARD_SECONDS) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{error.code}: {error.read().decode()}") from None

    return _decide
