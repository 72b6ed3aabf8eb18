"""`/mcp/` in the ASGI app: the agent's token first, then the gateway.

Every HTTP request is authenticated on its own (the transport is stateless), with
the REST API's tokens and code: `Authorization: Bearer <token>` holding the
`submit` and `claim` scopes (the gateway submits each call and runs it through the
handshake as the agent), under the same per-token rate limit. A refusal is the
API's JSON error with its `code` (401 for a missing, unknown, revoked or expired
token), before the SDK reads the body. Only POST is served: a stateless server has
no stream to open for a GET and no session for a DELETE to end (405).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.signals import request_finished, request_started
from rest_framework import exceptions

from agents.api.auth import AgentPrincipal, consume_rate, principal_from_header
from agents.models import Scope
from controlplane.http.codes import (
    INSUFFICIENT_SCOPE,
    INVALID_TOKEN,
    METHOD_NOT_ALLOWED,
    NOT_AUTHENTICATED,
    RATE_LIMITED,
)
from controlplane.http.codes import get as get_code
from controlplane.http.errors import error_body

from .config import load_upstreams
from .server import PRINCIPAL_SCOPE_KEY, Gateway, in_thread

__all__ = ["MCP_PATH", "authenticate", "with_gateway"]

MCP_PATH = "/mcp"
REQUIRED_SCOPES = (Scope.SUBMIT, Scope.CLAIM)


def authenticate(header: str) -> tuple[AgentPrincipal | None, tuple[str, str, dict[str, Any]] | None]:
    """(principal, None) or (None, (code, message, extra headers))."""
    if not header:
        return None, (NOT_AUTHENTICATED, "Send 'Authorization: Bearer <token>'.", {})
    try:
        principal = principal_from_header(header)
    except exceptions.AuthenticationFailed as exc:
        codes = exc.get_codes()
        return None, (codes if isinstance(codes, str) else INVALID_TOKEN, str(exc.detail), {})
    missing = [scope for scope in REQUIRED_SCOPES if not principal.has_scope(scope)]
    if missing:
        return None, (INSUFFICIENT_SCOPE, f"The MCP gateway needs the scopes {', '.join(missing)}.", {})
    wait = consume_rate(principal.token)
    if wait is not None:
        return None, (RATE_LIMITED, f"Too many requests; retry in {int(wait)} s.", {"retry-after": str(int(wait))})
    return principal, None


async def _refuse(send: Any, code: str, message: str, headers: dict[str, str]) -> None:
    status = get_code(code).status
    body = json.dumps(error_body(code, message)).encode()
    extra = [(name.encode(), value.encode()) for name, value in headers.items()]
    if status == 401:
        extra.append((b"www-authenticate", b'Bearer realm="mcp"'))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _is_mcp(path: str) -> bool:
    return path == MCP_PATH or path == f"{MCP_PATH}/"


def with_gateway(django_app: Any) -> Any:
    """`django_app` with the gateway at `/mcp/` (upstreams read now, from `MCP_UPSTREAMS_FILE`:
    a file that cannot be read or says something wrong stops the server at start)."""
    gateway = Gateway(load_upstreams(settings.MCP_UPSTREAMS_FILE))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _is_mcp(scope.get("path", "")):
            await django_app(scope, receive, send)
            return
        if scope.get("method") != "POST":
            # Stateless: no stream for the server to speak on (GET) and no session to end
            # (DELETE); a GET stream would only hang open.
            await _refuse(send, METHOD_NOT_ALLOWED, "The MCP gateway answers POST only.", {"allow": "POST"})
            return
        # Django's request signals, as its own ASGI handler sends them (connection upkeep, caches).
        await request_started.asend(sender=Gateway, scope=scope)
        try:
            header = next((value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization"), "")
            principal, refusal = await in_thread(authenticate)(header)
            if refusal is not None:
                await _refuse(send, *refusal)
                return
            await gateway.handle({**scope, PRINCIPAL_SCOPE_KEY: principal}, receive, send)
        finally:
            await request_finished.asend(sender=Gateway)

    app.gateway = gateway  # type: ignore[attr-defined]
    return app
