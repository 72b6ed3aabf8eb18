"""`GET /api/v1/requests/{id}/resume/?wait=S`: the long-poll, a plain Django async view.

While it waits it holds no database connection and no thread: it authenticates
and reads in the loop's shared thread pool (closing the connection each time),
gives back the per-request thread Django's handler created, joins the channel
group `request-<uuid>` on a fresh channel name and awaits a message with a
timeout. Any message only means "something changed": the answer is always read
again from the database, which is the truth (channel messages are at-most-once).
Hundreds of agents can wait on one server process this way.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.views import APIView

from approvals.broadcast import request_group
from approvals.errors import no_such_request
from approvals.models import ApprovalRequest
from approvals.states import State
from controlplane.http.codes import (
    INSUFFICIENT_SCOPE,
    INVALID_TOKEN,
    METHOD_NOT_ALLOWED,
    NOT_AUTHENTICATED,
    RATE_LIMITED,
    VALIDATION_ERROR,
)
from controlplane.http.compat import has_parked_sync_caller, release_request_thread
from controlplane.http.errors import json_error
from controlplane.http.schema import TOKEN_ERRORS, error_responses

from ..models import Scope
from ..resume import resume_payload
from .auth import AgentPrincipal, BearerTokenAuthentication, consume_rate, principal_from_header
from .serializers import ResumeSerializer

__all__ = ["resume_view"]

logger = logging.getLogger(__name__)


def _in_pool(fn):
    """Run `fn` in the loop's shared executor (not a per-request thread) and close
    the connection it opened, so nothing is held between calls.

    When a sync caller is already parked waiting for this view (Django's test
    client, or a sync-only middleware), the work goes to that caller's thread
    instead: it is held anyway, and it owns the connection (and, in tests, the
    transaction) the data lives in.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:  # a test's transaction owns the connection
                connection.close()

    async def run(*args: Any, **kwargs: Any) -> Any:
        return await sync_to_async(call, thread_sensitive=has_parked_sync_caller())(*args, **kwargs)

    return run


def _authenticate(header: str) -> tuple[AgentPrincipal | None, JsonResponse | None]:
    if not header:
        return None, json_error(NOT_AUTHENTICATED, "Send 'Authorization: Bearer <token>'.")
    try:
        principal = principal_from_header(header)
    except exceptions.AuthenticationFailed as exc:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else INVALID_TOKEN
        return None, json_error(code, str(exc.detail))
    if not principal.has_scope(Scope.READ):
        return None, json_error(INSUFFICIENT_SCOPE, "The token lacks the 'read' scope.")
    wait = consume_rate(principal.token)
    if wait is not None:
        response = json_error(RATE_LIMITED, f"Too many requests; retry in {int(wait)} s.", retry_after=int(wait))
        response["Retry-After"] = str(int(wait))
        return None, response
    return principal, None


def _read(agent_id: int, pk: uuid.UUID) -> tuple[dict[str, Any] | None, float | None]:
    """(resume payload or None if not the agent's, seconds until the decision deadline)."""
    found = ApprovalRequest.objects.select_related("agent").filter(agent_id=agent_id, pk=pk).first()
    if found is None:
        return None, None
    until_deadline = None
    if found.state == State.PENDING_APPROVAL and found.decide_by:
        until_deadline = (found.decide_by - timezone.now()).total_seconds()
    return resume_payload(found), until_deadline


def _parse_wait(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        return None
    if not value >= 0:  # also refuses NaN
        return None
    # Like any long-poll, the server may answer earlier than asked: longer waits are capped.
    return min(value, float(settings.API_MAX_WAIT_SECONDS))


async def resume_view(request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        response = json_error(METHOD_NOT_ALLOWED, f'Method "{request.method}" not allowed.')
        response["Allow"] = "GET, HEAD"
        return response
    # Django's signals and middleware are done with the per-request thread; from
    # here on, sync work runs in the shared pool.
    release_request_thread()
    principal, refusal = await _in_pool(_authenticate)(request.META.get("HTTP_AUTHORIZATION", ""))
    if refusal is not None:
        if refusal.status_code == 401:
            refusal["WWW-Authenticate"] = 'Bearer realm="api"'
        return refusal
    wait = _parse_wait(request.GET.get("wait"))
    if wait is None:
        return json_error(
            VALIDATION_ERROR, "wait must be a number of seconds, 0 or more.", fields={"wait": ["invalid"]}
        )
    agent_id = principal.agent.pk
    read = _in_pool(_read)
    layer = get_channel_layer() if wait > 0 else None
    channel = group = None
    if layer is not None:
        # Join before reading, so a decision made between the read and the join is not missed.
        group = request_group(str(pk))
        channel = await layer.new_channel("resume.")
        await layer.group_add(group, channel)
    try:
        payload, until_deadline = await read(agent_id, pk)
        if payload is None:
            return no_such_request().as_response()
        if layer is not None and not payload["decided"]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            if until_deadline is not None:  # wake at the decision deadline: it reads as expired then
                deadline = min(deadline, loop.time() + max(until_deadline, 0) + 0.05)
            while not payload["decided"]:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(remaining):
                        await layer.receive(channel)
                except TimeoutError:
                    payload, _ = await read(agent_id, pk)
                    break
                except Exception:  # noqa: BLE001 - a layer hiccup is only a missed hint
                    # Channel messages are hints; the database is the truth. A layer
                    # error (e.g. Redis timing out a cancelled read) means: read again.
                    logger.debug("channel layer receive failed; re-reading %s", pk, exc_info=True)
                    await asyncio.sleep(min(0.2, max(deadline - loop.time(), 0)))
                payload, _ = await read(agent_id, pk)
                if payload is None:
                    return no_such_request().as_response()
    finally:
        if layer is not None:
            await layer.group_discard(group, channel)
    return JsonResponse(payload)


# --- OpenAPI: the plain async view is documented through this wrapper ----------------------


class ResumeDocumentation(APIView):
    """Never routed; drf-spectacular reads the schema of `resume_view` from here."""

    authentication_classes = [BearerTokenAuthentication]

    @extend_schema(
        operation_id="resume_request",
        summary="Wait for the decision (long-poll)",
        description=(
            "Returns at once when the request is decided (or `wait` is 0), else waits up to `wait` "
            "seconds for the decision. `decided` false means: poll again. Expired and cancelled "
            "requests resume as `rejected` with feedback saying so; `state` tells them apart."
        ),
        parameters=[
            OpenApiParameter(
                "wait",
                float,
                required=False,
                description="Seconds to wait for a decision (capped at API_MAX_WAIT_SECONDS, 60 by default).",
            )
        ],
        responses={200: ResumeSerializer, **error_responses(*TOKEN_ERRORS)},
        tags=["agents"],
    )
    def get(self, request, pk):  # pragma: no cover - never routed, see resume_view
        raise exceptions.MethodNotAllowed(request.method)


# drf-spectacular's endpoint enumerator documents callbacks that carry `cls`.
resume_view.cls = ResumeDocumentation  # type: ignore[attr-defined]
resume_view.initkwargs = {}  # type: ignore[attr-defined]
