"""`ws/agent/`: decisions on an agent's own requests, pushed to its socket.

Agents send no Origin header, so this route is not behind the browser origin
validator; the token authenticates instead, from the `Authorization: Bearer`
header or a `token` query parameter (for WebSocket clients that cannot set
headers). The socket joins `agent-<id>`, where services push every change of the
agent's requests after commit. Messages are hints (at-most-once): on (re)connect
a client resyncs through `GET /api/v1/requests/{id}/resume/`.

The socket follows its token (approvals/sockets.py): it also joins
`agent-token-<id>`, where revoking, expiring or deleting the token, or
deactivating or deleting the agent, sends `principal.close` after commit; it
re-checks the token every SOCKET_RECHECK_SECONDS and before sending each event,
so a revoked token never hears another decision. Close code 4001.

Messages to the agent: `{"event": "request.changed", "request_id", "state",
"decided", "resume_data", "tool_result"}`; `{"event": "pong"}` answers a ping.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db.models import Q
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import receiver
from django.utils import timezone

from approvals.broadcast import agent_group
from approvals.models import ApprovalRequest
from approvals.sockets import PrincipalRecheck, close_groups_on_commit

from .models import Agent, AgentToken, Scope
from .resume import resume_payload
from .services import InvalidToken, authenticate_token

__all__ = ["AgentConsumer", "token_group"]

CLOSE_UNAUTHENTICATED = 4001
CLOSE_FORBIDDEN = 4003


def _token_from_scope(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, raw = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return raw.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return (query.get("token") or [""])[0]


def token_group(token_id: int) -> str:
    """The channel group of every socket one token opened."""
    return f"agent-token-{token_id}"


def token_usable(token_id: int) -> bool:
    return AgentToken.objects.filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
        pk=token_id,
        revoked_at__isnull=True,
        agent__is_active=True,
    ).exists()


class AgentConsumer(PrincipalRecheck, AsyncJsonWebsocketConsumer):
    groups_joined: tuple[str, ...] = ()
    revoked_close_code = CLOSE_UNAUTHENTICATED

    async def connect(self) -> None:
        raw = _token_from_scope(self.scope)
        try:
            token = await database_sync_to_async(authenticate_token)(raw) if raw else None
        except InvalidToken:
            token = None
        if token is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if Scope.READ not in token.scopes:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.agent_id = token.agent_id
        self.token_id = token.pk
        self.groups_joined = (agent_group(token.agent_id), token_group(token.pk))
        for name in self.groups_joined:
            await self.channel_layer.group_add(name, self.channel_name)
        await self.accept()
        self.start_rechecks()

    async def disconnect(self, code: int) -> None:
        self.stop_rechecks()
        for name in self.groups_joined:
            await self.channel_layer.group_discard(name, self.channel_name)
        self.groups_joined = ()

    def principal_still_valid(self) -> bool:
        return token_usable(self.token_id)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"event": "pong"})

    async def request_change(self, message: dict[str, Any]) -> None:
        if message.get("agent_id") != self.agent_id or self.principal_closed:
            return  # never another agent's request, whatever reached the group
        usable, payload = await self._payload(message["request_id"])
        if not usable:
            await self.close_for_principal()  # the close message may have been dropped
        elif payload is not None:
            await self.send_json({"event": "request.changed", **payload})

    @database_sync_to_async
    def _payload(self, request_id: str) -> tuple[bool, dict[str, Any] | None]:
        """(is the token still usable, the request's resume payload if it is and exists)."""
        if not token_usable(self.token_id):
            return False, None
        found = ApprovalRequest.objects.select_related("agent").filter(pk=request_id, agent_id=self.agent_id).first()
        return True, (resume_payload(found) if found is not None else None)


# --- Closing a token's sockets (connected by AgentsConfig.ready) -------------------------------


@receiver(post_save, sender=AgentToken, dispatch_uid="agents.close-revoked-token-sockets")
def _token_saved(sender, instance: AgentToken, **kwargs: Any) -> None:
    if not instance.is_usable():
        close_groups_on_commit([token_group(instance.pk)])


@receiver(post_delete, sender=AgentToken, dispatch_uid="agents.close-deleted-token-sockets")
def _token_deleted(sender, instance: AgentToken, **kwargs: Any) -> None:
    close_groups_on_commit([token_group(instance.pk)])


@receiver(post_save, sender=Agent, dispatch_uid="agents.close-deactivated-agent-sockets")
def _agent_saved(sender, instance: Agent, **kwargs: Any) -> None:
    if not instance.is_active:
        close_groups_on_commit(token_group(pk) for pk in instance.tokens.values_list("pk", flat=True))


@receiver(pre_delete, sender=Agent, dispatch_uid="agents.close-deleted-agent-sockets")
def _agent_deleted(sender, instance: Agent, **kwargs: Any) -> None:
    close_groups_on_commit(token_group(pk) for pk in instance.tokens.values_list("pk", flat=True))
