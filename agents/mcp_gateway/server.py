"""The gateway's MCP server: `tools/list` and `tools/call` over the upstreams.

Stateless Streamable HTTP (`StreamableHTTPSessionManager(stateless=True)`): every
HTTP request carries its own token and is served whole by whichever process gets
it, so several daphne processes behind one address serve one client. The SDK needs
its manager's `run()` entered before it serves anything, and daphne sends no ASGI
lifespan, so `ensure_running` enters it on the server's event loop on the first
request, with the task group the upstream connections live in.

A call:

- first, the request it already is: an identical call (agent, tool, arguments, the
  client's call id) within the window finds the same request (`held`), else a new
  one is submitted under that key;
- `prohibited`: a tool error naming the rule; the upstream never sees the call;
- waiting for reviewers (or running in another process): held at most
  `MCP_HOLD_SECONDS`, with progress notifications naming the request's page, then
  "pending approval, request <id>: call again";
- approved (`low` is auto-approved): claimed through the handshake as the agent
  (the emergency stop, token revocation, expiry, run-once, and the tool's definition
  now against the approved target), forwarded with exactly the granted params,
  completed with the result's digest, the result kept for retries and returned
  (rebuilt, never its `_meta`);
- already ran: the kept result, or `outcome_unknown` said as such, never a second run;
- rejected, expired, cancelled, refused at re-validation: the action `tool_result`
  text of the decision (the reviewer's feedback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from agents.api.auth import AgentPrincipal
from approvals import errors as domain_errors
from approvals.broadcast import request_group
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.snapshots import stable_hash
from approvals.states import State

from . import calls, held
from .config import Upstream
from .upstreams import UpstreamError, UpstreamPool

__all__ = ["PRINCIPAL_SCOPE_KEY", "Gateway", "security_settings"]

logger = logging.getLogger(__name__)

# Where the ASGI wrapper leaves the authenticated agent in the request's scope.
PRINCIPAL_SCOPE_KEY = "controlplane.agent_principal"
# How often a held call reads its request again: between broadcasts (and sends progress),
# and without a channel layer.
_TICK_SECONDS = 2.0
_POLL_SECONDS = 0.25


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
            tool = await self._current_tool(server, tool_name)
        except UpstreamError as exc:
            return _text(f"The tool's server is unavailable ({exc}); nothing was run. Try again later.")
        if tool is None:
            return _text(f"There is no tool {params.name!r} here; list the tools to see their names.")
        arguments = dict(params.arguments or {})
        digest = held.call_digest(calls.action_type_for(server, tool.name), arguments, _call_id(params))
        try:
            request = await in_thread(calls.find_or_submit)(agent, server, tool, arguments, digest)
        except (calls.ArgumentsRefused, DomainError) as exc:
            return _text(f"The call was refused before it was run: {exc}.")
        if request.state == State.REJECTED and request.resolution_code == "prohibited_by_policy":
            return _refused_by_policy(request)
        request = await self._hold(ctx, request)
        return await self._answer(request, agent, server, tool)

    async def _current_tool(self, server: str, tool_name: str) -> types.Tool | None:
        return next((tool for tool in await self.pool.list_tools(server) if tool.name == tool_name), None)

    async def _hold(self, ctx: Any, request: ApprovalRequest) -> ApprovalRequest:
        """Wait (at most `MCP_HOLD_SECONDS`) while `request` waits for reviewers or runs
        elsewhere, telling the client where it can be decided (progress notifications,
        when the client asked for them). Woken by the request's broadcast (the channel
        layer, as the API's long-poll is), and reading it again every `_TICK_SECONDS`
        regardless: the messages are hints, the database is the truth."""
        waiting = (State.PENDING_APPROVAL, State.EXECUTING)
        if request.state not in waiting:
            return request
        layer = get_channel_layer()
        group = request_group(str(request.pk))
        channel = await layer.new_channel("mcp.") if layer is not None else ""
        if layer is not None:  # join before reading again, so no decision falls in between
            await layer.group_add(group, channel)
        try:
            request = await in_thread(calls.reread)(request)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + settings.MCP_HOLD_SECONDS
            url = f"{settings.SITE_URL.rstrip('/')}/requests/{request.pk}/"
            message = f"Waiting for a reviewer to decide request {request.pk}: {url}"
            tick = 0
            while request.state in waiting and (remaining := deadline - loop.time()) > 0:
                with contextlib.suppress(Exception):  # a client that asked for no progress, or left
                    await ctx.session.report_progress(tick, None, message)
                tick += 1
                await _woken(layer, channel, min(remaining, _TICK_SECONDS if layer is not None else _POLL_SECONDS))
                request = await in_thread(calls.reread)(request)
        finally:
            if layer is not None:
                await layer.group_discard(group, channel)
        return request

    async def _answer(
        self, request: ApprovalRequest, agent: Any, server: str, tool: types.Tool
    ) -> types.CallToolResult:
        state = request.state
        if state == State.APPROVED:
            return await self._run_approved(request, agent, server, tool)
        if state == State.PENDING_APPROVAL:
            stopped = (request.classification or {}).get("risk_level") == "low"
            return pending_result(request.pk, "the emergency stop is on" if stopped else "a reviewer decides")
        if state == State.EXECUTING:
            return _text(
                f"The approved call is running (request {request.pk}); its outcome is not known yet. "
                "Call again later with the same arguments: it will not be run a second time."
            )
        if state in (State.SUCCEEDED, State.FAILED) and request.attempts > 0:
            return await in_thread(_ran_answer)(request)
        return _text(await in_thread(held.decided_text)(request))

    async def _run_approved(
        self, request: ApprovalRequest, agent: Any, server: str, tool: types.Tool
    ) -> types.CallToolResult:
        # The definition as the upstream lists it now: one changed since approval is refused.
        target_hash = stable_hash(calls.target_for(server, tool))
        try:
            grant = await in_thread(calls.claim)(request, agent, target_hash)
        except DomainError as exc:
            if exc.code == domain_errors.EMERGENCY_STOP:
                return pending_result(request.pk, "the emergency stop is on")
            if exc.code == domain_errors.ALREADY_CLAIMED:
                return await self._answer(await in_thread(calls.reread)(request), agent, server, tool)
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
            result=held.result_digest(answer),
            error="the upstream tool answered with an error" if result.is_error else "",
        )
        await in_thread(held.keep_result)(request, answer)
        return answer


async def _woken(layer: Any, channel: str, seconds: float) -> None:
    """Return on the request's next broadcast, or after `seconds`."""
    if layer is None:
        await asyncio.sleep(seconds)
        return
    try:
        async with asyncio.timeout(seconds):
            await layer.receive(channel)
    except TimeoutError:
        pass
    except Exception:  # noqa: BLE001 - a layer hiccup is only a missed hint; the caller reads again
        logger.debug("channel layer receive failed", exc_info=True)
        await asyncio.sleep(min(0.2, seconds))


def _call_id(params: types.CallToolRequestParams) -> str:
    """The client's own id for this call, when it gives one (`_meta["controlplane/call_id"]`)."""
    meta: dict[str, Any] = dict(params.meta or {})
    value = meta.get(held.CALL_ID_META)
    return value[:200] if isinstance(value, str) else ""


def _ran_answer(request: ApprovalRequest) -> types.CallToolResult:
    """A retry of a call that already ran: the kept result, or what is known of it."""
    if request.resolution_code == "outcome_unknown":
        return _text(
            f"The approved call was started (request {request.pk}) but its outcome is unknown: the gateway "
            "lost it between starting the tool and hearing back. It will not be run again; check whether "
            "it took effect before making a new call."
        )
    kept = held.kept_result(request)
    if kept is not None:
        return kept
    how = "succeeded" if request.state == State.SUCCEEDED else "ended with an error"
    return _text(
        f"The approved call already ran and {how} (request {request.pk}); its result is no longer kept. "
        "It will not be run again.",
        error=request.state != State.SUCCEEDED,
    )
