"""The gateway's MCP server: `tools/list` and `tools/call` over the upstreams.

Stateless Streamable HTTP (`StreamableHTTPSessionManager(stateless=True)`): every
HTTP request carries its own token and is served whole by whichever process gets
it, so several daphne processes behind one address serve one client. The SDK needs
its manager's `run()` entered before it serves anything, and daphne sends no ASGI
lifespan, so `ensure_running` enters it on the server's event loop on the first
request, with the task group the upstream connections live in.

A call, in this piece:

- `prohibited`: a tool error naming the rule; the upstream never sees the call;
- `low` (auto-approved): claimed through the handshake as the agent (so the
  emergency stop, token revocation, expiry and run-once hold), forwarded with
  exactly the granted params, completed with the result's digest, and the
  upstream's result returned (rebuilt, never its `_meta`);
- anything else (and a low call while the emergency stop is on): the request
  waits for reviewers and the client hears "pending approval, request <id>: call
  again". Waiting for the decision inside the call, and a retry finding the same
  request, are the next piece (docs/mcp.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from agents.api.auth import AgentPrincipal
from approvals import errors as domain_errors
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.snapshots import stable_hash
from approvals.states import State
from controlplane.http.fields import json_size

from . import calls
from .config import Upstream
from .upstreams import UpstreamError, UpstreamPool

__all__ = ["PRINCIPAL_SCOPE_KEY", "Gateway", "security_settings"]

logger = logging.getLogger(__name__)

# Where the ASGI wrapper leaves the authenticated agent in the request's scope.
PRINCIPAL_SCOPE_KEY = "controlplane.agent_principal"


def in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run the ORM work `fn` in the shared thread pool, closing its connection after."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:
                connection.close()

    return sync_to_async(call, thread_sensitive=False)


def security_settings() -> TransportSecuritySettings:
    """DNS-rebinding protection on, with the hosts Django serves (`ALLOWED_HOSTS`), on any
    port. The SDK matches hosts exactly: Django's `.example.com` and `*` patterns have
    no equivalent there and are left out (name such hosts one by one). No Origin is
    allowed: agents send none, and a browser page's request is refused."""
    hosts: list[str] = []
    for host in settings.ALLOWED_HOSTS:
        if host == "*" or host.startswith("."):
            continue
        hosts.extend((host, f"{host}:*"))
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[])


def _text(message: str, *, error: bool = True) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=error)


def pending_result(request_id: Any, why: str = "") -> types.CallToolResult:
    return _text(
        f"Pending approval, request {request_id}: call again later with the same arguments."
        + (f" ({why})" if why else "")
        + " The tool has not run."
    )


def _refused_by_policy(request: ApprovalRequest) -> types.CallToolResult:
    reason = (request.classification or {}).get("reason") or request.feedback
    return _text(
        f"Refused by policy (rule {request.rule_name or 'the default'}): {reason}. "
        f"The tool was not run and will not be; do not retry this call unchanged. Request {request.pk}."
    )


def result_digest(result: types.CallToolResult) -> dict[str, Any]:
    """What the request keeps of an upstream result: its sha256 and size, not its body."""
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"sha256": stable_hash(body), "bytes": json_size(body), "is_error": bool(result.is_error)}


class Gateway:
    """One per process: the MCP server, its session manager and the upstream pool."""

    def __init__(self, upstreams: tuple[Upstream, ...]) -> None:
        self.pool = UpstreamPool(upstreams)
        self.server: Server[Any] = Server(
            "controlplane",
            version="1",
            instructions=(
                "Tools of the upstream MCP servers, namespaced <server>.<tool>. Every call passes the "
                "control plane's rules and, where they say so, its reviewers."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(
            self.server,
            stateless=True,
            security_settings=security_settings(),
            max_request_body_size=settings.API_MAX_BODY_BYTES,
        )
        self._ready: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def ensure_running(self) -> None:
        """Enter the manager's `run()` on this event loop, once (daphne sends no lifespan)."""
        if self._ready is None:
            self._ready = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run(self._ready))
        await self._ready.wait()
        if self._runner is not None and self._runner.done():
            raise RuntimeError("the MCP gateway stopped; see the log")

    async def _run(self, ready: asyncio.Event) -> None:
        try:
            async with self.manager.run(), anyio.create_task_group() as group:
                self.pool.group = group
                ready.set()
                await anyio.sleep_forever()
        except BaseException:
            logger.exception("the MCP gateway stopped")
            raise
        finally:
            ready.set()
            self.pool.close()

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        await self.ensure_running()
        await self.manager.handle_request(scope, receive, send)

    # --- Handlers -----------------------------------------------------------------------

    @staticmethod
    def _principal(ctx: Any) -> AgentPrincipal:
        principal = getattr(ctx.request, "scope", {}).get(PRINCIPAL_SCOPE_KEY) if ctx.request is not None else None
        if not isinstance(principal, AgentPrincipal):  # never served without the ASGI wrapper's check
            raise PermissionError("no authenticated agent on this request")
        return principal

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self._principal(ctx)
        tools: list[types.Tool] = []
        for name in self.pool.upstreams:
            try:
                upstream_tools = await self.pool.list_tools(name)
            except UpstreamError:
                logger.warning("tools/list: upstream %s unavailable", name, exc_info=True)
                continue  # one upstream down hides its tools, not the others'
            tools.extend(await in_thread(calls.listed_tools)(name, upstream_tools))
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        agent = self._principal(ctx).agent
        server, _, tool_name = params.name.partition(".")
        if server not in self.pool.upstreams or not tool_name:
            return _text(f"There is no tool {params.name!r} here; list the tools to see their names.")
        try:
            tool = next((tool for tool in await self.pool.list_tools(server) if tool.name == tool_name), None)
        except UpstreamError as exc:
            return _text(f"The tool's server is unavailable ({exc}); nothing was run. Try again later.")
        if tool is None:
            return _text(f"There is no tool {params.name!r} here; list the tools to see their names.")
        try:
            request = await in_thread(calls.submit_call)(agent, server, tool, dict(params.arguments or {}))
        except (calls.ArgumentsRefused, DomainError) as exc:
            return _text(f"The call was refused before it was run: {exc}.")
        if request.state == State.REJECTED:
            return _refused_by_policy(request)
        if request.state == State.PENDING_APPROVAL:
            stopped = (request.classification or {}).get("risk_level") == "low"
            return pending_result(request.pk, "the emergency stop is on" if stopped else "a reviewer decides")
        return await self._run_approved(request, agent, server, tool)

    async def _run_approved(
        self, request: ApprovalRequest, agent: Any, server: str, tool: types.Tool
    ) -> types.CallToolResult:
        try:
            grant = await in_thread(calls.claim)(request, agent)
        except DomainError as exc:
            if exc.code == domain_errors.EMERGENCY_STOP:
                return pending_result(request.pk, "the emergency stop is on")
            return _text(f"The approved call may not run now ({exc.code}): {exc.message} Request {request.pk}.")
        try:
            result = await self.pool.call_tool(server, tool.name, grant.params)
        except UpstreamError as exc:
            await in_thread(calls.complete)(
                request.pk, agent, grant, succeeded=False, result=None, error=str(exc), code="outcome_unknown"
            )
            return _text(
                f"The tool's server failed during the call ({exc}); whether it ran is unknown. "
                f"Request {request.pk} records the outcome as unknown; check before calling again."
            )
        # Rebuilt, never forwarded: the upstream's `_meta` is its own envelope.
        answer = types.CallToolResult(
            content=result.content, structured_content=result.structured_content, is_error=result.is_error
        )
        await in_thread(calls.complete)(
            request.pk,
            agent,
            grant,
            succeeded=not result.is_error,
            result=result_digest(answer),
            error="the upstream tool answered with an error" if result.is_error else "",
        )
        return answer
