"""`ws/agent/`: decisions on an agent's own requests, pushed to its socket.

Agents send no Origin header, so this route is not behind the browser origin
validator; the token authenticates instead, from the `Authorization: Bearer`
header or a `token` query parameter (for WebSocket clients that cannot set
headers). The socket joins `agent-<id>`, where services push every change of the
agent's requests after commit. Messages are hints (at-most-once): on (re)connect
a client resyncs through `GET /api/v1/requests/{id}/resume/`.

Messages to the agent: `{"event": "request.changed", "request_id", "state",
"decided", "resume_data", "tool_result"}`; `{"event": "pong"}` answers a ping.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.broadcast import agent_group
from approvals.models import ApprovalRequest

from .models import Scope
from .resume import resume_payload
from .services import InvalidToken, authenticate_token

__all__ = ["AgentConsumer"]

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


class AgentConsumer(AsyncJsonWebsocketConsumer):
    group_name: str | None = None

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
        self.group_name = agent_group(token.agent_id)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group_name:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"event": "pong"})

    async def request_change(self, message: dict[str, Any]) -> None:
        if message.get("agent_id") != self.agent_id:
            return  # never another agent's request, whatever reached the group
        payload = await self._payload(message["request_id"])
        if payload is not None:
            await self.send_json({"event": "request.changed", **payload})

    @database_sync_to_async
    def _payload(self, request_id: str) -> dict[str, Any] | None:
        found = ApprovalRequest.objects.filter(pk=request_id, agent_id=self.agent_id).first()
        return resume_payload(found) if found is not None else None
