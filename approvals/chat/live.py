"""The Slack messages as a live view of their request: an outbox on `SlackMessage`.

A change of the request (a decision anywhere, expiry, cancellation: the domain signal)
bumps `wanted` on each of its messages; `deliver` claims a message with a lease (one
sender per message at a time), renders the request from the database *now*, calls
chat.update and records `sent = wanted as read`. A change made while it was sending
leaves `wanted > sent`, so it renders and sends again: an older rendering never lands
after a newer one, and a decided request never keeps a live Approve button. Slack's 429
leaves the message due at `Retry-After` (the task retries with that countdown); a beat
sweep picks up what the broker lost and messages whose shown state lags the request's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F, Q
from django.utils import timezone
from slack_sdk.errors import SlackApiError

from approvals.models import ApprovalRequest, SlackMessage

from . import slack

logger = logging.getLogger(__name__)
LEASE = timedelta(seconds=60)  # longer than one chat.update can take (timeout 10 s)
MAX_ATTEMPTS = 8
RESENDS = 5  # changes caught while sending, rendered again under the same lease
# Slack's answers that no retry changes: the message, channel or token is gone, or refused.
PERMANENT = {
    "message_not_found",
    "channel_not_found",
    "cant_update_message",
    "edit_window_closed",
    "invalid_blocks",
    "msg_too_long",
    "not_in_channel",
    "is_archived",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
}


@dataclass(frozen=True)
class RateLimited(Exception):
    retry_after: int


def mark_changed(request_id: str) -> int:
    """Every message of the request wants a fresh rendering. Returns how many it has."""
    return SlackMessage.objects.filter(request__pk=request_id).update(wanted=F("wanted") + 1)


def _due(now: datetime):
    return (
        SlackMessage.objects.filter(wanted__gt=F("sent"))
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .filter(Q(retry_at__isnull=True) | Q(retry_at__lte=now))
    )


def retry_after_of(error: SlackApiError) -> int:
    headers = {name.lower(): value for name, value in (error.response.headers or {}).items()}
    raw = headers.get("retry-after")
    value = raw[0] if isinstance(raw, list) else raw
    try:
        return max(1, min(int(str(value)), 3600))
    except (TypeError, ValueError):
        return 30


def deliver(message_id: int, *, now: datetime | None = None) -> str:
    """One message brought up to date, if due and not being sent elsewhere: "sent",
    "not_due", "gave_up" or "retry". Raises `RateLimited` on Slack's 429 (the message stays
    due at Retry-After)."""
    now = now or timezone.now()
    if not _due(now).filter(pk=message_id).update(lease_until=now + LEASE):
        return "not_due"
    for _ in range(RESENDS):
        message = SlackMessage.objects.get(pk=message_id)
        wanted = message.wanted
        request = ApprovalRequest.objects.select_related("agent").get(pk=message.request_id)
        try:
            slack.web_client().chat_update(
                channel=message.channel, ts=message.ts, text=request.action_type, blocks=slack.blocks_for(request)
            )
        except SlackApiError as refused:
            if refused.response.status_code == 429:
                retry_after = retry_after_of(refused)
                _failed(message, now, "ratelimited", retry_at=now + timedelta(seconds=retry_after), count=False)
                raise RateLimited(retry_after) from None
            error = str(refused.response.get("error") or refused.response.status_code)
            return _failed(message, now, error, permanent=error in PERMANENT)
        except OSError as failed:  # timeouts, connection refused: Slack is down, decisions are not
            return _failed(message, now, f"{type(failed).__name__}: {failed}"[:200])
        if SlackMessage.objects.filter(pk=message_id, wanted=wanted).update(
            sent=wanted, shown_state=request.state, lease_until=None, retry_at=None, attempts=0, last_error=""
        ):
            return "sent"
        # the request changed while this rendering was on its way: render it again
    SlackMessage.objects.filter(pk=message_id).update(lease_until=None)
    return "retry"


def _failed(
    message: SlackMessage,
    now: datetime,
    error: str,
    *,
    retry_at: datetime | None = None,
    permanent: bool = False,
    count: bool = True,
) -> str:
    attempts = message.attempts + (1 if count else 0)
    give_up = permanent or attempts >= MAX_ATTEMPTS
    logger.warning("Slack update of message %s failed (%s)%s", message.pk, error, "; giving up" if give_up else "")
    fields = {"lease_until": None, "attempts": attempts, "last_error": error[:200]}
    if give_up:  # nothing more to send: the card in the browser stays the truth
        SlackMessage.objects.filter(pk=message.pk).update(sent=F("wanted"), retry_at=None, **fields)
        return "gave_up"
    retry_at = retry_at or now + timedelta(seconds=min(15 * 2 ** (attempts - 1), 900))
    SlackMessage.objects.filter(pk=message.pk).update(retry_at=retry_at, **fields)
    return "retry"


def deliver_request(request_id: str, *, now: datetime | None = None) -> int:
    """Every due message of one request; returns how many were sent. Raises `RateLimited`."""
    ids = list(_due(now or timezone.now()).filter(request_id=request_id).values_list("pk", flat=True))
    return sum(deliver(pk, now=now) == "sent" for pk in ids)


def sweep(*, now: datetime | None = None, limit: int = 200) -> list[str]:
    """Beat: messages whose shown state lags their request's (a change whose signal was lost
    with a crashed process) want an update; returns the requests with due messages."""
    now = now or timezone.now()
    settled = SlackMessage.objects.filter(wanted__lte=F("sent"), last_error="")  # given up: left alone
    lagging = settled.exclude(shown_state=F("request__state"))
    SlackMessage.objects.filter(pk__in=list(lagging.values_list("pk", flat=True)[:limit])).update(
        wanted=F("wanted") + 1
    )
    return sorted({str(pk) for pk in _due(now).values_list("request_id", flat=True)[:limit]})
