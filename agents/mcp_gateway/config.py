"""The upstream MCP servers, read from the deploy-time file `MCP_UPSTREAMS_FILE`.

Never from the database or the admin: an upstream's command is code the server
runs, so only whoever deploys the server may name one. The file is JSON (or TOML
when its name ends in `.toml`)::

    {"upstreams": [
        {"name": "demo", "transport": "stdio",
         "command": "/srv/controlplane/.venv/bin/python", "args": ["-m", "agents.mcp_gateway.demo_upstream"],
         "env": ["DEMO_UPSTREAM_CALLS_FILE"]},
        {"name": "github", "transport": "http", "url": "https://mcp.example.com/mcp/",
         "bearer_token_env": "GITHUB_MCP_TOKEN"}
    ]}

Credentials are named by environment variable, never written in the file: `env`
lists the variables a stdio upstream gets from the server's environment (nothing
else of it but the SDK's minimal defaults, PATH and HOME), `bearer_token_env` the
variable whose value an HTTP upstream gets as `Authorization: Bearer`. The agent
never sees either. A name is what tools are namespaced by (`demo.echo`): letters,
digits, `_` and `-`, no dot, unique.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["UpstreamConfigError", "Upstream", "load_upstreams", "parse_upstreams"]

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYS = {"name", "transport", "command", "args", "cwd", "env", "url", "bearer_token_env", "timeout_seconds"}


class UpstreamConfigError(ValueError):
    """The upstreams file is missing, unreadable or says something the gateway will not run."""


@dataclass(frozen=True)
class Upstream:
    name: str
    transport: str  # "stdio" | "http"
    command: str = ""
    args: tuple[str, ...] = ()
    cwd: str = ""
    env: tuple[str, ...] = ()
    url: str = ""
    bearer_token_env: str = ""
    timeout_seconds: float = 30.0


def load_upstreams(path: str | Path) -> tuple[Upstream, ...]:
    """The upstreams `path` names; () for an empty path (no gateway upstreams)."""
    if not path:
        return ()
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UpstreamConfigError(f"MCP_UPSTREAMS_FILE {str(file)!r} cannot be read: {exc}") from None
    try:
        data = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UpstreamConfigError(f"MCP_UPSTREAMS_FILE {str(file)!r} is not valid: {exc}") from None
    return parse_upstreams(data, base=file.parent)


def parse_upstreams(data: Any, *, base: Path | None = None) -> tuple[Upstream, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("upstreams"), list):
        raise UpstreamConfigError("the upstreams file holds an object with a list 'upstreams'")
    found: list[Upstream] = []
    for index, entry in enumerate(data["upstreams"]):
        upstream = _upstream(entry, where=f"upstreams[{index}]", base=base)
        if any(other.name == upstream.name for other in found):
            raise UpstreamConfigError(f"upstreams[{index}]: the name {upstream.name!r} is used twice")
        found.append(upstream)
    return tuple(found)


def _upstream(entry: Any, *, where: str, base: Path | None) -> Upstream:
    if not isinstance(entry, dict):
        raise UpstreamConfigError(f"{where} must be an object")
    unknown = set(entry) - _KEYS
    if unknown:
        raise UpstreamConfigError(f"{where}: unknown keys {sorted(unknown)}")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise UpstreamConfigError(f"{where}: 'name' is lower-case letters, digits, '_' or '-' (no dot), at most 40")
    transport = entry.get("transport")
    env = _names(entry.get("env", []), where=f"{where}.env")
    timeout = entry.get("timeout_seconds", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise UpstreamConfigError(f"{where}: 'timeout_seconds' is a number of seconds from 1 to 600")
    if transport == "stdio":
        command, args = entry.get("command"), entry.get("args", [])
        if not isinstance(command, str) or not command:
            raise UpstreamConfigError(f"{where}: a stdio upstream needs 'command'")
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise UpstreamConfigError(f"{where}: 'args' is a list of strings")
        cwd = entry.get("cwd", "")
        if not isinstance(cwd, str):
            raise UpstreamConfigError(f"{where}: 'cwd' is a path")
        if cwd and base is not None and not Path(cwd).is_absolute():
            cwd = str((base / cwd).resolve())
        return Upstream(name, "stdio", command=command, args=tuple(args), cwd=cwd, env=env, timeout_seconds=timeout)
    if transport == "http":
        url, token_env = entry.get("url"), entry.get("bearer_token_env", "")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UpstreamConfigError(f"{where}: an http upstream needs an http(s) 'url'")
        if token_env and (not isinstance(token_env, str) or not _ENV_NAME.match(token_env)):
            raise UpstreamConfigError(f"{where}: 'bearer_token_env' names an environment variable")
        return Upstream(name, "http", url=url, bearer_token_env=token_env, env=env, timeout_seconds=timeout)
    raise UpstreamConfigError(f"{where}: 'transport' is 'stdio' or 'http'")


def _names(value: Any, *, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and _ENV_NAME.match(item) for item in value):
        raise UpstreamConfigError(f"{where} is a list of environment variable names")
    return tuple(value)
