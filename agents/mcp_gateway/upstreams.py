"""Connections to the upstream MCP servers: one open SDK client per upstream and process.

An upstream is started (stdio) or connected to (HTTP) on first use and then kept:
starting a Python MCP server costs seconds, a call on an open session milliseconds.
This is per-process plumbing, not session state a client depends on: any gateway
process serves any request, each with its own upstream connections. A connection
that fails is dropped and the next use opens a new one.

HTTP upstreams go through the outbound rules (`controlplane.http.outbound`): the URL
must be on the allow-list and resolve to permitted addresses, the connection goes to
the address that was checked (`PinnedAsyncTransport`, the SDK's HTTP client being
httpx2, not the httpx the rest of the server uses), and no redirect leaves the
upstream's origin (the SDK's own rule).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from controlplane.http.outbound import OutboundURLRefused, check_url

from .config import Upstream

__all__ = ["MAX_LIST_PAGES", "PinnedAsyncTransport", "UpstreamError", "UpstreamPool"]

logger = logging.getLogger(__name__)

MAX_LIST_PAGES = 20
T = TypeVar("T")


class UpstreamError(Exception):
    """An upstream could not be reached, or failed the outbound rules; the message says which."""


class PinnedAsyncTransport(httpx2.AsyncHTTPTransport):
    """Connects to one checked address whatever the host name resolves to now (TLS and
    `Host` keep the name), like `controlplane.http.outbound.PinnedTransport` for httpx."""

    def __init__(self, host: str, address: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._host = host
        self._address = address

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != self._host:
            raise httpx2.ConnectError(f"{request.url.host} is not the pinned host {self._host}", request=request)
        request.url = request.url.copy_with(host=self._address)
        request.extensions = {**request.extensions, "sni_hostname": self._host}
        return await super().handle_async_request(request)


async def _transport_for(upstream: Upstream) -> Any:
    if upstream.transport == "stdio":
        env = {name: os.environ[name] for name in upstream.env if name in os.environ}
        return StdioServerParameters(
            command=upstream.command, args=list(upstream.args), env=env, cwd=upstream.cwd or None
        )
    try:  # resolves the host: off the event loop
        target = await anyio.to_thread.run_sync(check_url, upstream.url)
    except OutboundURLRefused as exc:
        raise UpstreamError(f"upstream {upstream.name!r}: {exc.message}") from None
    headers = {}
    if upstream.bearer_token_env:
        headers["Authorization"] = f"Bearer {os.environ.get(upstream.bearer_token_env, '')}"
    client = httpx2.AsyncClient(
        headers=headers,
        follow_redirects=False,
        timeout=httpx2.Timeout(upstream.timeout_seconds, read=upstream.timeout_seconds * 2),
        transport=PinnedAsyncTransport(target.host, target.addresses[0]),
    )
    return streamable_http_client(target.url, http_client=client)


class _Connection:
    """One upstream's open client, held by a task in the gateway's task group."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.client: Client | None = None
        self._closed = anyio.Event()
        self._lock = anyio.Lock()

    async def get(self, group: TaskGroup) -> Client:
        async with self._lock:
            if self.client is None:
                try:
                    with anyio.fail_after(self.upstream.timeout_seconds):
                        await group.start(self._hold)
                except UpstreamError:
                    raise
                except Exception as exc:
                    raise UpstreamError(f"upstream {self.upstream.name!r} could not be started: {exc}") from exc
            assert self.client is not None
            return self.client

    def drop(self, client: Client | None = None) -> None:
        """Close the open connection (only if it is still `client`, when given: a request
        that failed on an old connection never closes its replacement)."""
        if client is not None and client is not self.client:
            return
        self._closed.set()
        self.client = None

    async def _hold(self, *, task_status: TaskStatus[None]) -> None:
        # This connection's own close signal: a replacement opened after a drop gets another.
        closed = self._closed = anyio.Event()
        held: Client | None = None
        try:
            async with Client(await _transport_for(self.upstream), cache=None) as client:
                held = self.client = client
                task_status.started()
                await closed.wait()
        except Exception:
            if held is None:
                raise
            logger.warning("upstream %s: connection ended", self.upstream.name, exc_info=True)
        finally:
            if held is not None and self.client is held:
                self.client = None


class UpstreamPool:
    """The configured upstreams, connected on demand within `group` (the gateway's task group)."""

    def __init__(self, upstreams: tuple[Upstream, ...]) -> None:
        self.upstreams = {upstream.name: upstream for upstream in upstreams}
        self._connections = {upstream.name: _Connection(upstream) for upstream in upstreams}
        self.group: TaskGroup | None = None

    async def _use(self, name: str, operation: Callable[[Client], Awaitable[T]]) -> T:
        connection = self._connections[name]
        assert self.group is not None, "the gateway's task group is not running"
        client = await connection.get(self.group)
        try:
            with anyio.fail_after(connection.upstream.timeout_seconds):
                return await operation(client)
        except MCPError as exc:
            # An error answer (the session is still good), or the connection lost mid-request.
            if exc.code == types.CONNECTION_CLOSED:
                connection.drop(client)
            raise UpstreamError(f"upstream {name!r} answered an error: {exc}") from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError, TimeoutError) as exc:
            connection.drop(client)
            raise UpstreamError(f"upstream {name!r} failed: {exc!r}") from exc

    async def list_tools(self, name: str) -> list[types.Tool]:
        async def listing(client: Client) -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            return tools

        return await self._use(name, listing)

    async def call_tool(self, name: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await self._use(name, lambda client: client.call_tool(tool, arguments))

    def close(self) -> None:
        for connection in self._connections.values():
            connection.drop()
