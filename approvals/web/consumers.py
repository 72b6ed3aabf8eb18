"""The reviewer's live socket (`ws/reviewer/`) and what closes it.

Permissions are checked once, on connect: the socket joins the channel group of
each of the user's auth groups (`approvers-<group id>`, where services push
`request.change` for cards routed to that group), a per-user group
(`user-<id>`) and the `emergency` group. Nothing queries the database per event:
when a person's group membership changes or they log out, a signal sends
`user.close` to their per-user group and every socket of theirs closes; the page
reconnects (and is refused if their session ended) and resyncs from
`queue/sync.json`, since channel messages are at-most-once hints. Deactivating
a person (`is_active=False`) closes them the same way, and every socket
re-checks its person every SOCKET_RECHECK_SECONDS (still active, same groups,
session still theirs: approvals/sockets.py), in case the close message was lost.

Messages to the browser are JSON: `{"event": "card.created"|"card.updated"|
"card.removed", "request_id", "state", "data"}` (`data.decided_by` on a decision),
`{"event": "emergency.changed", "scope": "global"|"agent", "on": bool, "agent":
name|null, "reason"}` (from `approvals.emergency.set_emergency_stop`) and
`{"event": "presence", "request_id", "name", "key", "here": bool}`.

Presence (who else is looking at a card) lives only in the channel layer and the
pages: the page sends `{"type": "presence", "request_id": id|null}` when its
selection changes; the socket checks once that its person may view that request,
then tells the approver groups that hold a permission on it (so nobody hears of a
request they may not see), and "gone" when the selection moves or the socket
closes. `{"type": "presence.sync"}` (sent by a page on connect) asks the sockets of
the same groups to say again what they look at. Nothing is written per selection.
A page repeats its selection every ~20 s as a heartbeat: the socket says "here"
again to the groups it already knows (no permission read), and pages forget a look
not heard of for ~45 s, so a lost "gone" cannot leave a stale name for good.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from functools import partial
from importlib import import_module
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import m2m_changed, post_save, pre_delete
from django.dispatch import receiver
from django.utils.crypto import constant_time_compare

from ..atomic import after_commit
from ..broadcast import approvers_group, user_group, viewer_group_ids
from ..emergency import EMERGENCY_GROUP
from ..people import full_name
from ..permissions import with_view_grant
from ..sockets import PrincipalRecheck, sessions_ended

__all__ = ["EMERGENCY_GROUP", "ReviewerConsumer", "close_user_sockets", "user_group"]

# Close codes the page understands: 4001 = membership changed or logged out (reconnect and resync).
CLOSE_SESSION_CHANGED = 4001
CLOSE_UNAUTHENTICATED = 4003
# A page asks the others to re-announce at most this often: each ask fans out to every
# socket of the person's groups.
PRESENCE_SYNC_INTERVAL = 5.0
# A selection is told once it has held this long (j-j-j through the list tells only the last).
PRESENCE_SETTLE_SECONDS = 0.15


class ReviewerConsumer(PrincipalRecheck, AsyncJsonWebsocketConsumer):
    """Forwards card changes for the reviewer's groups and the emergency banner."""

    groups_joined: list[str]
    revoked_close_code = CLOSE_SESSION_CHANGED
    # None until an accepted connect sets them: a refused socket's disconnect finds them so.
    presence_task: asyncio.Task | None = None
    viewing: tuple[str, list[str]] | None = None  # (request id, groups told)

    async def connect(self) -> None:
        self.groups_joined = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        group_ids = await self._group_ids(user)
        names = [approvers_group(gid) for gid in group_ids] + [user_group(user.pk), EMERGENCY_GROUP]
        for name in names:
            await self.channel_layer.group_add(name, self.channel_name)
        self.groups_joined = names
        self.user_id, self.group_ids = user.pk, set(group_ids)
        self.display_name = full_name(user)
        # Names this socket's presence (one person may have several tabs open); not a secret.
        self.presence_key = secrets.token_hex(8)
        self.viewing = None
        self.wanted: str | None = None
        self.presence_task = None
        self.last_presence_sync = 0.0
        self.heartbeat = False
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None else None
        await self.accept()
        self.start_rechecks()

    def principal_still_valid(self) -> bool:
        user = get_user_model().objects.filter(pk=self.user_id, is_active=True).first()
        if user is None or set(user.groups.values_list("pk", flat=True)) != self.group_ids:
            return False
        if not self.session_key:
            return True
        # A fresh read of the session: the scope's copy was loaded once, at connect.
        stored = import_module(settings.SESSION_ENGINE).SessionStore(self.session_key)
        return str(stored.get(SESSION_KEY)) == str(user.pk) and constant_time_compare(
            stored.get(HASH_SESSION_KEY) or "", user.get_session_auth_hash()
        )

    @database_sync_to_async
    def _group_ids(self, user) -> list[int]:
        return list(user.groups.values_list("pk", flat=True))

    async def disconnect(self, code: int) -> None:
        self.stop_rechecks()
        if self.presence_task is not None:
            self.presence_task.cancel()
        if self.viewing is not None:
            await self._tell_presence(here=False)
            self.viewing = None
        for name in self.groups_joined:
            await self.channel_layer.group_discard(name, self.channel_name)
        self.groups_joined = []

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # A ping keeps idle proxies from closing the socket; presence is the one thing a page says.
        if not isinstance(content, dict) or self.principal_closed:
            return
        kind = content.get("type")
        if kind == "ping":
            await self.send_json({"event": "pong"})
        elif kind == "presence":
            await self._look_at(_request_id(content.get("request_id")))
        elif kind == "presence.sync":
            await self._ask_for_presence()

    # --- presence ----------------------------------------------------------------------

    async def _look_at(self, request_id: str | None) -> None:
        """Follow the page's selection, settled: selections arriving faster than
        PRESENCE_SETTLE_SECONDS only move the target (the last wins), so a page that
        floods costs one permission read per settle interval, not one per message."""
        self.wanted = request_id
        if self.viewing is not None and self.viewing[0] == request_id:
            self.heartbeat = True  # the same look again: say "here" again, once per settle
        if self.presence_task is None or self.presence_task.done():
            self.presence_task = asyncio.ensure_future(self._settle_presence())

    async def _settle_presence(self) -> None:
        await asyncio.sleep(PRESENCE_SETTLE_SECONDS)
        if (
            self.heartbeat
            and not self.principal_closed
            and self.viewing is not None
            and (self.viewing[0] == self.wanted)
        ):
            await self._tell_presence(here=True)
        self.heartbeat = False
        while not self.principal_closed and (self.viewing[0] if self.viewing else None) != self.wanted:
            target = self.wanted
            if self.viewing is not None:
                await self._tell_presence(here=False)
                self.viewing = None
            groups = await self._presence_groups(target) if target else []
            if target != self.wanted:
                continue  # moved on while we read: follow the newest
            if groups and target:  # groups are only read for a target
                self.viewing = (target, groups)
                await self._tell_presence(here=True)
            break  # told, or not a request this person may see: say nothing

    @database_sync_to_async
    def _presence_groups(self, request_id: str) -> list[str]:
        """The channel groups to tell that this person looks at `request_id`: those of
        the groups holding a permission on it; none unless this person may view it."""
        user = get_user_model().objects.filter(pk=self.user_id, is_active=True).first()
        if user is None or not with_view_grant(user).filter(pk=request_id).exists():
            return []
        return [approvers_group(gid) for gid in viewer_group_ids(request_id)]

    async def _tell_presence(self, *, here: bool) -> None:
        if self.viewing is None:
            return  # callers tell only while viewing; nothing to say otherwise
        request_id, groups = self.viewing
        message = {
            "type": "presence.update",
            "request_id": request_id,
            "name": self.display_name,
            "key": self.presence_key,
            "here": here,
        }
        for name in groups:
            await self.channel_layer.group_send(name, message)

    async def _ask_for_presence(self) -> None:
        now = time.monotonic()
        if now - self.last_presence_sync < PRESENCE_SYNC_INTERVAL:
            return
        self.last_presence_sync = now
        for name in self.groups_joined:
            if name.startswith("approvers-"):
                await self.channel_layer.group_send(name, {"type": "presence.ping", "key": self.presence_key})

    async def presence_update(self, message: dict[str, Any]) -> None:
        if self.principal_closed or message.get("key") == self.presence_key:
            return
        await self.send_json(
            {
                "event": "presence",
                "request_id": message["request_id"],
                "name": message["name"],
                "key": message["key"],
                "here": bool(message.get("here")),
            }
        )

    async def presence_ping(self, message: dict[str, Any]) -> None:
        if self.principal_closed or message.get("key") == self.presence_key or self.viewing is None:
            return
        await self._tell_presence(here=True)

    # --- channel layer messages -------------------------------------------------------

    async def request_change(self, message: dict[str, Any]) -> None:
        if self.principal_closed:
            return
        await self.send_json(
            {
                "event": message["event"],
                "request_id": message["request_id"],
                "state": message["state"],
                "data": message.get("data") or {},
            }
        )

    async def emergency_changed(self, message: dict[str, Any]) -> None:
        if self.principal_closed:
            return
        await self.send_json(
            {
                "event": "emergency.changed",
                "scope": message.get("scope", "global"),
                "on": bool(message.get("on")),
                "agent": message.get("agent_name") or None,
                "reason": message.get("reason", ""),
            }
        )

    async def user_close(self, message: dict[str, Any]) -> None:
        await self.close_for_principal()


def _request_id(value: Any) -> str | None:
    """A request id as the page sent it, or None (nothing selected, or not an id)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


# --- Closing a person's sockets ----------------------------------------------------------


def close_user_sockets(user_ids) -> None:
    """Close every reviewer socket of these people, after the current transaction commits."""
    for uid in sorted({int(uid) for uid in user_ids if uid is not None}):
        after_commit(partial(_send_user_close, uid), what=f"the close message to the sockets of user {uid}")


def _send_user_close(uid: int) -> None:
    # At-most-once like every push; never fails the membership change (after_commit).
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(user_group(uid), {"type": "user.close"})


_pending_clear: dict[int, list[int]] = {}


@receiver(m2m_changed, sender=get_user_model().groups.through)
def _membership_changed(sender, instance, action: str, reverse: bool, pk_set, **kwargs) -> None:
    """A group added to or removed from a person, from either side of the relation."""
    if reverse and action == "pre_clear":
        # group.user_set.clear(): the members are gone by post_clear, so remember them now.
        _pending_clear[id(instance)] = list(instance.user_set.values_list("pk", flat=True))
        return
    if action not in {"post_add", "post_remove", "post_clear"}:
        return
    if not reverse:
        close_user_sockets([instance.pk])
    elif action == "post_clear":
        close_user_sockets(_pending_clear.pop(id(instance), []))
    else:
        close_user_sockets(pk_set or [])


@receiver(post_save, sender=get_user_model())
def _user_saved(sender, instance, **kwargs) -> None:
    if not instance.is_active:
        close_user_sockets([instance.pk])


@receiver(pre_delete, sender=get_user_model())
def _user_deleted(sender, instance, **kwargs) -> None:
    close_user_sockets([instance.pk])


@receiver(user_logged_out)
def _logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        close_user_sockets([user.pk])


@receiver(sessions_ended)
def _sessions_ended(sender, user_ids, **kwargs) -> None:
    """An identity provider ended these people's sessions (controlplane.accounts.provider_sessions)."""
    close_user_sockets(user_ids)
