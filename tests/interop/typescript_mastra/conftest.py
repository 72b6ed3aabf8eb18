"""The Mastra integration (hitl-controlplane/mastra) with the real @mastra/core as the host.

Hosts are the scripts in clients/typescript/hosts/mastra/live, run as their own Node
processes on the built client (its `npm ci` + build, then the host folder's `npm ci`, once
per session and only when a lockfile changed). They talk to a real daphne as mail-bot with
the server's key pinned, so every decision and grant is verified.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.conftest import Host, _npm_ci

HOST = Path(__file__).resolve().parents[3] / "clients" / "typescript" / "hosts" / "mastra"


@pytest.fixture(scope="session")
def mastra_integration_host(typescript_package) -> Path:  # the client is built first
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
