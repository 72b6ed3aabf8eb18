"""The Mastra integration (hitl-controlplane/mastra) with the real @mastra/core as the host.

Hosts are the scripts in clients/typescript/hosts/mastra/live, run as their own Node
processes on the built client (its `npm ci` + build, then the host folder's `npm ci`, once
per session and only when a lockfile changed). They talk to a real daphne as mail-bot with
the server's key pinned, so every decision and grant is verified.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.services import missing_service
from tests.interop.conftest import Host, _npm_ci

PACKAGE = Path(__file__).resolve().parents[3] / "clients" / "typescript"
HOST = PACKAGE / "hosts" / "mastra"


def _built_client() -> None:
    """clients/typescript from its lockfile, built: the hosts import its dist/."""
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    stamp = PACKAGE / "node_modules" / ".installed-from-lock"
    steps = [["npm", "run", "build"]]
    if not (stamp.exists() and stamp.read_text() == lock):
        steps.insert(0, ["npm", "ci", "--no-audit", "--no-fund"])
    for step in steps:
        done = subprocess.run(step, cwd=PACKAGE, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(step)} in {PACKAGE} failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    stamp.write_text(lock)


@pytest.fixture(scope="session")
def mastra_integration_host() -> Path:
    import shutil

    if shutil.which("node") is None or shutil.which("npm") is None:
        missing_service("the Mastra integration tests need node and npm (.ci/run installs Debian's)")
    _built_client()
    _npm_ci(HOST)
    return HOST


@pytest.fixture
def run_mastra(mastra_integration_host, daphne_server, token, server_public_key):
    """`run_mastra(script, url=None, **env)`: a live/<script> host, as mail-bot, the server's key pinned."""
    started: list[Host] = []

    def _run(script: str, url: str | None = None, **env: str) -> Host:
        host = Host(
            mastra_integration_host,
            f"live/{script}",
            {
                "CONTROLPLANE_URL": url or daphne_server.url,
                "CONTROLPLANE_TOKEN": token,
                "CONTROLPLANE_PUBLIC_KEYS": server_public_key,
                "CONTROLPLANE_AGENT": "mail-bot",
                **env,
            },
        )
        started.append(host)
        return host

    yield _run
    for host in started:
        host.stop()
