"""A small MCP server over stdio to try the gateway with (and to test it against).

Run by the gateway as an upstream (`docs/mcp.md`), never imported by the server. It
counts its own tool calls: with `DEMO_UPSTREAM_CALLS_FILE` set, every call appends
one line (`<tool> <arguments as JSON>`) to that file, so a test can prove how many
times the upstream really ran, whatever the gateway answered. With
`DEMO_UPSTREAM_TEST_TOOLS=1` it also offers `crash`, which dies mid-call, `environment`, the
names of the variables it was started with, `slow_note`, a held tool that takes its time,
and `redefine`, which gives `send_note` another description (an upstream changing a tool
after reviewers approved a call of it).

    python -m agents.mcp_gateway.demo_upstream              # over stdio
    python -m agents.mcp_gateway.demo_upstream --http 8765  # over Streamable HTTP, on loopback
"""

from __future__ import annotations

import json
import os
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("demo")


def _count(tool: str, arguments: dict) -> None:
    path = os.environ.get("DEMO_UPSTREAM_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as calls:
            calls.write(f"{tool} {json.dumps(arguments, sort_keys=True)}\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False))
def echo(text: str) -> str:
    """Say `text` back."""
    _count("echo", {"text": text})
    return f"echo: {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    _count("add", {"a": a, "b": b})
    return a + b


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_everything(confirm: bool = False) -> str:
    """Pretend to delete every record (the demo's prohibited tool)."""
    _count("delete_everything", {"confirm": confirm})
    return "deleted everything (not really)"


@server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=True))
def send_note(to: str, text: str) -> str:
    """Pretend to send a short note (the demo's held tool)."""
    _count("send_note", {"to": to, "text": text})
    return f"note sent to {to}"


if os.environ.get("DEMO_UPSTREAM_TEST_TOOLS") == "1":

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def crash(text: str) -> str:
        """Die in the middle of the call (tests: an upstream lost between claim and complete)."""
        _count("crash", {"text": text})
        os._exit(3)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def environment() -> list[str]:
        """The names of the environment variables this process was given (tests: what leaks)."""
        _count("environment", {})
        return sorted(os.environ)

    @server.tool(annotations=ToolAnnotations(destructive_hint=False))
    def slow_note(to: str, seconds: float) -> str:
        """Pretend to send a note, taking `seconds` (tests: a gateway killed mid-call)."""
        _count("slow_note", {"to": to, "seconds": seconds})
        time.sleep(min(seconds, 30))
        return f"slow note sent to {to}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def redefine(description: str) -> str:
        """Give `send_note` the description `description` (tests: a tool changed after approval)."""
        _count("redefine", {"description": description})
        server.remove_tool("send_note")
        server.add_tool(
            send_note,
            description=description,
            annotations=ToolAnnotations(destructive_hint=False, open_world_hint=True),
        )
        return "redefined"


def serve_http(port: int) -> None:
    """Serve over Streamable HTTP on loopback instead (tests: an HTTP upstream). With
    `DEMO_UPSTREAM_BEARER` set, a request without `Authorization: Bearer <it>` is 401."""
    import uvicorn

    app = server.streamable_http_app()
    expected = os.environ.get("DEMO_UPSTREAM_BEARER", "")

    async def guarded(scope, receive, send):
        if expected and scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if given != f"Bearer {expected}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--http"]:
        serve_http(int(sys.argv[2]))
    else:
        server.run("stdio")
