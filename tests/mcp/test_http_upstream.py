"""An upstream over Streamable HTTP: reached through the outbound rules with the SDK's
own HTTP client (httpx2, pinned to the checked address), its credential taken from
the server's environment and never seen by the agent."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from approvals import policy
from approvals.people import Person
from tests.live import DaphneServer, child_environment, free_port, stop_process

from .test_gateway import gateway, run, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_SECRET = "remote-upstream-credential"


@pytest.fixture(scope="module")
def http_upstream(tmp_path_factory) -> Iterator[tuple[int, Path]]:
    """The demo upstream over HTTP on loopback, asking for its own bearer credential."""
    port, calls = free_port(), tmp_path_factory.mktemp("remote") / "calls.log"
    env = {**child_environment(), "DEMO_UPSTREAM_BEARER": UPSTREAM_SECRET, "DEMO_UPSTREAM_CALLS_FILE": str(calls)}
    process = subprocess.Popen(
        [sys.executable, "-m", "agents.mcp_gateway.demo_upstream", "--http", str(port)], cwd=ROOT, env=env
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp", timeout=1)
        except urllib.error.HTTPError:
            break  # it answers (401 without the credential)
        except OSError:
            time.sleep(0.2)
    yield port, calls
    stop_process(process)


@pytest.fixture(scope="module")
def remote_gateway(django_db_setup, django_db_blocker, http_upstream, tmp_path_factory) -> Iterator:
    port, _ = http_upstream
    config = tmp_path_factory.mktemp("remote-config") / "upstreams.json"
    upstream = {
        "name": "remote",
        "transport": "http",
        "url": f"http://127.0.0.1:{port}/mcp",
        "bearer_token_env": "REMOTE_MCP_TOKEN",
    }
    config.write_text(json.dumps({"upstreams": [upstream]}))
    env = child_environment(
        MCP_UPSTREAMS_FILE=str(config),
        REMOTE_MCP_TOKEN=UPSTREAM_SECRET,
        OUTBOUND_URL_ALLOWLIST=f"http://127.0.0.1:{port}",
        OUTBOUND_ALLOW_PRIVATE="1",
    )
    with django_db_blocker.unblock():
        server = DaphneServer(env=env)
    yield server
    server.stop()


def test_a_low_call_reaches_an_http_upstream_with_the_servers_credential(
    remote_gateway, http_upstream, token, admin_user
):
    _, calls = http_upstream
    calls.write_text("")
    policy.save_rule(
        {"name": "remote_add_low", "priority": 1, "action_type": "remote.add", "risk_level": "low"},
        actor=Person(admin_user),
        note="remote adds are harmless",
    )

    async def session():
        async with gateway(remote_gateway, token) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            return names, await client.call_tool("remote.add", {"a": 20, "b": 22})

    names, result = run(session())

    assert "remote.add" in names and "remote.echo" in names
    assert text_of(result) == "42"
    assert calls.read_text().splitlines() == ['add {"a": 20, "b": 22}']
    assert UPSTREAM_SECRET not in json.dumps(result.model_dump(mode="json"))
