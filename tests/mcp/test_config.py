"""The upstreams file: what it may say, and what stops the server at start instead.

An upstream's command is code the server runs, so it comes only from this
deploy-time file; anything the gateway would not run as written is refused whole.
"""

from __future__ import annotations

import json

import pytest

from agents.mcp_gateway.config import Upstream, UpstreamConfigError, load_upstreams, parse_upstreams
from agents.mcp_gateway.server import security_settings


def test_a_json_file_names_stdio_and_http_upstreams(tmp_path):
    path = tmp_path / "upstreams.json"
    path.write_text(
        json.dumps(
            {
                "upstreams": [
                    {"name": "demo", "transport": "stdio", "command": "python", "args": ["-m", "x"], "cwd": "here"},
                    {
                        "name": "git-hub",
                        "transport": "http",
                        "url": "https://mcp.example.com/mcp/",
                        "bearer_token_env": "GITHUB_MCP_TOKEN",
                    },
                ]
            }
        )
    )

    demo, github = load_upstreams(path)

    assert demo == Upstream("demo", "stdio", command="python", args=("-m", "x"), cwd=str(tmp_path / "here"))
    assert github.url == "https://mcp.example.com/mcp/" and github.bearer_token_env == "GITHUB_MCP_TOKEN"


def test_a_toml_file_says_the_same(tmp_path):
    path = tmp_path / "upstreams.toml"
    path.write_text('[[upstreams]]\nname = "demo"\ntransport = "stdio"\ncommand = "python"\nenv = ["DEMO_TOKEN"]\n')

    assert load_upstreams(path) == (Upstream("demo", "stdio", command="python", env=("DEMO_TOKEN",)),)


def test_no_file_means_no_upstreams():
    assert load_upstreams("") == ()


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "de.mo", "transport": "stdio", "command": "x"}, "no dot"),
        ({"name": "Demo", "transport": "stdio", "command": "x"}, "lower-case"),
        ({"name": "demo", "transport": "stdio"}, "needs 'command'"),
        ({"name": "demo", "transport": "stdio", "command": "x", "args": "-m x"}, "list of strings"),
        ({"name": "demo", "transport": "ftp", "command": "x"}, "'stdio' or 'http'"),
        ({"name": "demo", "transport": "http", "url": "file:///etc/passwd"}, "http(s) 'url'"),
        ({"name": "demo", "transport": "http", "url": "https://x", "bearer_token_env": "A B"}, "environment variable"),
        ({"name": "demo", "transport": "stdio", "command": "x", "env": ["PATH=/tmp"]}, "environment variable names"),
        ({"name": "demo", "transport": "stdio", "command": "x", "token": "s3cret"}, "unknown keys"),
        ({"name": "demo", "transport": "stdio", "command": "x", "timeout_seconds": 0}, "timeout_seconds"),
    ],
)
def test_an_upstream_the_gateway_would_not_run_as_written_is_refused(entry, says):
    with pytest.raises(UpstreamConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_upstreams({"upstreams": [entry]})


def test_a_name_used_twice_is_refused():
    entry = {"name": "demo", "transport": "stdio", "command": "x"}
    with pytest.raises(UpstreamConfigError, match="used twice"):
        parse_upstreams({"upstreams": [entry, entry]})


def test_an_unreadable_or_broken_file_is_refused(tmp_path):
    broken = tmp_path / "upstreams.json"
    broken.write_text("{not json")

    with pytest.raises(UpstreamConfigError, match="not valid"):
        load_upstreams(broken)
    with pytest.raises(UpstreamConfigError, match="cannot be read"):
        load_upstreams(tmp_path / "missing.json")


def test_dns_rebinding_protection_stays_on_with_the_hosts_django_serves(settings):
    settings.ALLOWED_HOSTS = ["controlplane.example.com", "127.0.0.1", ".example.org", "*"]

    found = security_settings()

    assert found.enable_dns_rebinding_protection is True
    assert found.allowed_hosts == ["controlplane.example.com", "controlplane.example.com:*", "127.0.0.1", "127.0.0.1:*"]
    assert found.allowed_origins == []
