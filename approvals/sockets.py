"""What every socket does to follow the identity it serves.

A socket joins a channel group of its principal (a reviewer's `user-<id>`, an
agent token's `agent-token-<id>`); revoking the token, deactivating the user or
changing their groups sends `principal.close` there after commit
(`close_groups_on_commit`) and the socket closes. Channel messages are
at-most-once, so each socket also re-checks its principal every
`SOCKET_RECHECK_SECONDS` (`PrincipalRecheck`) and closes itself when the check
fails: a dropped close message delays the close by at most that long.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.dispatch import Signal

from .atomic import after_commit

__all__ = ["CLOSE_MESSAGE", "PrincipalRecheck", "close_groups_on_commit", "sessions_ended"]

logger = logging.getLogger(__name__)
CLOSE_MESSAGE = {"type": "principal.close"}

# Sent with `user_ids` by whatever ends people's sessions outside a request of theirs (an
# identity provider's back-channel logout or re-check: controlplane.accounts), inside the
# transaction that ends them: every reviewer socket of theirs closes after it commits.
# The site's accounts sit above this app, so this app offers the signal and they send it.
sessions_ended = Signal()


def close_groups_on_commit(groups: Iterable[str]) -> None:
    """After the current transaction commits, close every socket in these channel groups.

    One effect per group: a group that cannot be reached does not keep the others open
    (and the periodic re-check closes it anyway)."""
    for name in sorted(set(groups)):
        after_commit(partial(_send_close, name), what=f"the close message to {name}")


def _send_close(name: str) -> None:
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(name, CLOSE_MESSAGE)


class PrincipalRecheck:
    """Mixin for an async WebSocket consumer. Call `start_rechecks()` after accepting
    and `stop_rechecks()` on disconnect; implement `principal_still_valid()` (sync,
    runs in a thread with database access) and set `revoked_close_code`."""

    revoked_close_code = 4001
    principal_closed = False
    _recheck_task: asyncio.Task | None = None

    if TYPE_CHECKING:
        # The consumer this is mixed into provides `close` (Channels ships no types). Declared
        # for the checker only: defined for real here, it would shadow the consumer's in the MRO.
        async def close(self, code: int | None = None) -> None: ...

    def principal_still_valid(self) -> bool:
        raise NotImplementedError

    def start_rechecks(self) -> None:
        self._recheck_task = asyncio.ensure_future(self._recheck_forever())

    def stop_rechecks(self) -> None:
        if self._recheck_task is not None:
            self._recheck_task.cancel()
            self._recheck_task = None

    async def close_for_principal(self) -> None:
        """Close once; events already queued for this socket are dropped from now on."""
        if not self.principal_closed:
            self.principal_closed = True
            await self.close(code=self.revoked_close_code)

    async def principal_close(self, message: dict) -> None:
        await self.close_for_principal()

    async def _recheck_forever(self) -> None:
        interval = float(settings.SOCKET_RECHECK_SECONDS)
        while not self.principal_closed:
            await asyncio.sleep(interval)
            try:
                valid = await database_sync_to_async(self.principal_still_valid)()
            except Exception:  # a database hiccup is not a revocation; try again next time
                logger.warning("socket principal re-check failed", exc_info=True)
                continue
            if not valid:
                await self.close_for_principal()
