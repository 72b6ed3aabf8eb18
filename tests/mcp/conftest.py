"""The MCP gateway's stories: the real SDK client on one end, the real demo upstream
(agents/mcp_gateway/demo_upstream.py, over stdio) on the other, a real daphne between.

The upstream appends a line to a file for every call it runs (`upstream_calls`), so
a test proves what reached it, whatever the gateway answered.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from approvals import policy
from approvals.people import Person

# The demo upstream's tools, as the policy sees them in these stories.
GATEWAY_RULES = [
    {"name": "demo_echo_low", "priority": 10, "action_type": "demo.echo", "risk_level": "low"},
    {"name": "demo_add_low", "priority": 11, "action_type": "demo.add", "risk_level": "low"},
    {
        "name": "demo_wipe_prohibited",
        "priority": 12,
        "action_type": "demo.delete_everything",
        "risk_level": "prohibited",
    },
    {"name": "demo_environment_low", "priority": 15, "action_type": "demo.environment", "risk_level": "low"},
    {"name": "demo_crash_low", "priority": 14, "action_type": "demo.crash", "risk_level": "low"},
    {
        "name": "demo_notes_high",
        "priority": 13,
        "action_type": "demo.send_note",
        "risk_level": "high",
        "editable_params": ["text"],
    },
    {"name": "demo_slow_high", "priority": 16, "action_type": "demo.slow_note", "risk_level": "high"},
    {"name": "demo_redefine_low", "priority": 17, "action_type": "demo.redefine", "risk_level": "low"},
]


@pytest.fixture(scope="module")
def calls_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "upstream-calls.log"


def _start_gateway(django_db_blocker, calls_file, **env: str):
    from tests.live import DaphneServer, child_environment

    config = calls_file.parent / "upstreams.json"
    config.write_text(
        json.dumps(
            {
                "upstreams": [
                    {
                        "name": "demo",
                        "transport": "stdio",
                        "command": sys.executable,
                        "args": ["-m", "agents.mcp_gateway.demo_upstream"],
                        "cwd": str(Path(__file__).resolve().parents[2]),
                        "env": ["DEMO_UPSTREAM_CALLS_FILE", "DEMO_UPSTREAM_TEST_TOOLS", "PYTHONPATH"],
                    }
                ]
            }
        )
    )
    with django_db_blocker.unblock():
        return DaphneServer(
            env=child_environment(
                MCP_UPSTREAMS_FILE=str(config),
                DEMO_UPSTREAM_CALLS_FILE=str(calls_file),
                DEMO_UPSTREAM_TEST_TOOLS="1",
                # A held call waits a second for its decision here (50 s in production).
                **{"MCP_HOLD_SECONDS": "1", **env},
            )
        )


@pytest.fixture(scope="module")
def gateway_server(django_db_setup, django_db_blocker, calls_file) -> Iterator:
    """A daphne serving the gateway with the demo upstream as `demo`."""
    server = _start_gateway(django_db_blocker, calls_file)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def second_gateway_server(django_db_setup, django_db_blocker, calls_file, gateway_server) -> Iterator:
    """Another daphne process with the same configuration: a second replica behind one address."""
    server = _start_gateway(django_db_blocker, calls_file)
    yield server
    server.stop()


@pytest.fixture
def upstream_calls(calls_file) -> Iterator:
    """The calls the upstream ran during this test, as (tool, arguments) pairs."""
    calls_file.write_text("")

    def read() -> list[tuple[str, dict]]:
        lines = calls_file.read_text().splitlines()
        return [(line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in lines]

    yield read


@pytest.fixture
def gateway_rules(admin_user) -> None:
    policy.save_rules(GATEWAY_RULES, actor=Person(admin_user), note="the demo upstream's tools")
