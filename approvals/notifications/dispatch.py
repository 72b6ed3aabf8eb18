"""The notification entry points: queue, deliver, remind, escalate.

Every entry point is safe to run twice (unique outbox rows per request, event and
channel; escalation guarded on the request's `escalated` flag under its row lock)
and takes `now` so tests can freeze time. Delivery is one attempt per call: on
failure the outbox row gets `next_attempt_at` with exponential backoff, and
`deliver_due` (beat) picks it up; after `NOTIFICATION_MAX_ATTEMPTS` it gives up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Subquery
from django.utils import timezone

from controlplane.http import outbound

from .. import services
from ..masking import MASK, masked_paths, shown_params
from ..models import ApprovalRequest, DeliveryAttempt, DeliveryStatus, Notification, RuleNotification
from ..policy.notification_settings import SETTINGS_FIELDS, save_settings  # noqa: F401 (re-exported)
from ..services.core import RequestChange
from ..states import State
from .channels import DeliveryError, post_slack, post_slack_stub, post_webhook, send_email

__all__ = [
    "MASK",
    "build_payload",
    "deliver",
    "deliver_due",
    "escalate_overdue",
    "on_request_changed",
    "queue_arrival",
    "save_settings",
    "send_due_reminders",
]

logger = logging.getLogger(__name__)
BATCH = 200
# While an attempt is in flight its row is not due, so deliver_due cannot start a
# second one; if the worker dies mid-attempt the row becomes due again after this.
IN_FLIGHT_LEASE = timedelta(minutes=5)


def max_attempts() -> int:
    return int(settings.NOTIFICATION_MAX_ATTEMPTS)


def backoff(attempt: int) -> timedelta:
    """Wait after the `attempt`-th failure: 30 s, 60 s, 120 s... capped at an hour. Without
    jitter: reminders and escalations are minutes apart anyway, and the schedule stays exact."""
    return outbound.backoff(attempt, base=int(settings.NOTIFICATION_RETRY_BASE_SECONDS), cap=3600, jitter=0)


# --- Settings -------------------------------------------------------------------------------


# save_settings (re-exported here) is approvals.policy.notification_settings: through four eyes.


def settings_for(rule_name: str) -> RuleNotification:
    """The rule's settings, or unsaved defaults for the editor's form (a rule without
    a saved row sends nothing: notifications are opt-in per rule)."""
    return RuleNotification.objects.filter(rule_name=rule_name).select_related(
        "escalation_group"
    ).first() or RuleNotification(rule_name=rule_name)


# --- What is sent ------------------------------------------------------------------------------


def _masked_params(request: ApprovalRequest) -> dict[str, Any]:
    return shown_params(request)


def build_payload(request: ApprovalRequest, event: str, **extra: Any) -> dict[str, Any]:
    """The JSON every channel sends for `event`: what a person needs to decide where to
    look, never a masked param's value (the classification's reason and explanation
    are already redacted by the rules engine)."""
    base_url = settings.SITE_URL.rstrip("/")
    return {
        "event": f"request.{event}",
        "request_id": str(request.pk),
        "kind": request.kind,
        "action_type": request.action_type,
        "agent": request.agent.name,
        "risk_level": request.risk_level,
        "rule": request.rule_name or None,
        "reason": request.classification.get("reason", ""),
        "params": _masked_params(request),
        "masked_params": sorted(masked_paths(request)),
        "plan_title": request.plan_title or None,
        "decide_by": request.decide_by.isoformat() if request.decide_by else None,
        "url": f"{base_url}/#request-{request.pk}",
        **extra,
    }


# --- Queueing ---------------------------------------------------------------------------------------


def _queue(
    request: ApprovalRequest, event: str, destinations: Iterable[tuple[str, str]], *, now: datetime, **extra: Any
) -> list[int]:
    """Create outbox rows (one per channel); an existing row for the same event and
    channel wins, so a second sweep never notifies twice."""
    payload = build_payload(request, event, **extra)
    created = []
    for channel, destination in destinations:
        try:
            with transaction.atomic():
                row = Notification.objects.create(
                    request=request,
                    event=event,
                    channel=channel,
                    destination=destination,
                    payload=payload,
                    next_attempt_at=now,
                )
        except IntegrityError:
            continue
        created.append(row.pk)
    return created


def _destinations(rule: RuleNotification, group_name: str | None) -> list[tuple[str, str]]:
    destinations: list[tuple[str, str]] = []
    if group_name:
        destinations.append((Notification.Channel.EMAIL, group_name))
    if rule.webhook_url:
        destinations.append((Notification.Channel.WEBHOOK, rule.webhook_url))
    if group_name and settings.SLACK_BOT_TOKEN:
        destinations.append((Notification.Channel.SLACK, group_name))
    if rule.slack_channel and settings.SLACK_BOT_TOKEN:
        destinations.append((Notification.Channel.SLACK_STUB, rule.slack_channel))
    return destinations


DELIVER_TASK = "approvals.notifications.deliver"  # approvals.notifications.tasks.deliver_notification


def _enqueue_on_commit(notification_ids: list[int]) -> None:
    def publish() -> None:
        for pk in notification_ids:
            try:
                # By name: the task module imports this one, never the other way round.
                current_app.send_task(DELIVER_TASK, args=[pk], retry=False)
            except Exception:  # the broker is down: deliver_due (beat) sends it from the database
                logger.warning("could not publish notification %s; deliver_due will send it", pk, exc_info=True)

    transaction.on_commit(publish)


def queue_arrival(request_id, *, now: datetime | None = None, rule_name: str | None = None) -> list[int]:
    """Queue the "card arrived" notifications of a pending request (email to its
    approver group if the rule asks, and the rule's webhook), and publish their
    delivery after commit. Returns the new outbox ids (empty when nothing is due).

    `rule_name`: the request's rule name when the caller knows it (the
    `request_changed` subscriber does), saving the lookup of it.
    """
    now = now or timezone.now()
    # Notifications are opt-in per rule and most rules have none: one cheap query
    # answers that before the request itself is read (this runs on every submit).
    if rule_name is None:
        rule_name_of_request = ApprovalRequest.objects.filter(pk=request_id).values("rule_name")[:1]
        rule = RuleNotification.objects.filter(rule_name=Subquery(rule_name_of_request)).first()
    else:
        rule = RuleNotification.objects.filter(rule_name=rule_name).first()
    if rule is None:
        return []
    request = ApprovalRequest.objects.select_related("agent", "approver_group").filter(pk=request_id).first()
    if request is None or request.state != State.PENDING_APPROVAL:
        return []
    group = request.approver_group.name if (rule.notify_on_arrival and request.approver_group is not None) else None
    with transaction.atomic():
        ids = _queue(request, Notification.Event.ARRIVED, _destinations(rule, group), now=now)
        _enqueue_on_commit(ids)
    return ids


def on_request_changed(sender, *, change: RequestChange, **kwargs) -> None:
    """`request_changed` subscriber: a request that starts waiting for people queues its
    arrival notifications (after commit, never sending anything in the request that created it)."""
    if not (change.is_transition and change.to_state == State.PENDING_APPROVAL):
        return
    try:
        queue_arrival(change.request_id, rule_name=change.rule_name)
    except Exception:  # a notification problem must never break the submission that caused it
        logger.exception("could not queue arrival notifications for %s", change.request_id)


def send_due_reminders(*, now: datetime | None = None) -> int:
    """Beat entry point: remind approver groups of pending requests whose `decide_by`
    is within their rule's `remind_before_seconds`. Returns how many were queued.
    Queries: one for the rules with reminders, one per such rule, then per request."""
    now = now or timezone.now()
    queued = 0
    for rule in RuleNotification.objects.filter(remind_before_seconds__gt=0):
        if rule.remind_before_seconds is None:
            continue  # cannot happen: the filter above keeps only rules with a window
        due = (
            ApprovalRequest.objects.filter(
                state=State.PENDING_APPROVAL,
                rule_name=rule.rule_name,
                decide_by__gt=now,
                decide_by__lte=now + timedelta(seconds=rule.remind_before_seconds),
            )
            .exclude(notifications__event=Notification.Event.REMINDER)
            .select_related("agent", "approver_group")[:BATCH]
        )
        for request in due:
            group = request.approver_group.name if request.approver_group is not None else None
            with transaction.atomic():
                ids = _queue(request, Notification.Event.REMINDER, _destinations(rule, group), now=now)
                _enqueue_on_commit(ids)
            queued += bool(ids)
    return queued


def _escalation_group(rule: RuleNotification, request: ApprovalRequest) -> Group | None:
    if rule.escalation_group_id:
        return rule.escalation_group
    name = request.classification.get("escalation_group")
    return Group.objects.filter(name=name).first() if name else None


def escalate_overdue(*, now: datetime | None = None) -> int:
    """Beat entry point: escalate pending requests undecided for their rule's
    `escalate_after_seconds` to the escalation group (view and decide, audited
    `request.escalated`) and email that group. Returns how many were escalated."""
    now = now or timezone.now()
    escalated = 0
    for rule in RuleNotification.objects.filter(escalate_after_seconds__gt=0).select_related("escalation_group"):
        if rule.escalate_after_seconds is None:
            continue  # cannot happen: the filter above keeps only rules with a delay
        due = (
            ApprovalRequest.objects.filter(
                state=State.PENDING_APPROVAL,
                escalated=False,
                rule_name=rule.rule_name,
                created_at__lte=now - timedelta(seconds=rule.escalate_after_seconds),
            )
            .filter(Q(decide_by__isnull=True) | Q(decide_by__gt=now))
            .select_related("agent")[:BATCH]
        )
        for request in due:
            group = _escalation_group(rule, request)
            if group is None:
                logger.warning(
                    "rule %s escalates after %ss but names no escalation group",
                    rule.rule_name,
                    rule.escalate_after_seconds,
                )
                continue
            if not services.escalate_request(request.pk, group=group, reason="undecided"):
                continue
            escalated += 1
            request.refresh_from_db()
            with transaction.atomic():
                ids = _queue(
                    request,
                    Notification.Event.ESCALATED,
                    _destinations(rule, group.name),
                    now=now,
                    escalated_to=group.name,
                    escalation_reason="undecided",
                )
                _enqueue_on_commit(ids)
    return escalated


# --- Delivery --------------------------------------------------------------------------------------


def deliver(notification_id: int, *, now: datetime | None = None) -> str:
    """Make one delivery attempt of a pending, due notification; returns its status.

    Claims the attempt with a conditional update (attempts += 1 where it is still
    pending and due), so two workers never send the same attempt; the network call
    happens outside any transaction.
    """
    now = now or timezone.now()
    claimed = Notification.objects.filter(
        pk=notification_id,
        delivered_at=None,
        gave_up_at=None,
        next_attempt_at__lte=now,
    ).update(attempts=F("attempts") + 1, next_attempt_at=now + IN_FLIGHT_LEASE)
    if not claimed:
        return "not_due"
    notification = Notification.objects.get(pk=notification_id)
    senders: dict[str, Callable[[Notification], int | None]] = {
        Notification.Channel.EMAIL: send_email,
        Notification.Channel.SLACK: post_slack,
        Notification.Channel.SLACK_STUB: post_slack_stub,
    }
    send = senders.get(notification.channel, post_webhook)
    started = time.monotonic()
    status_code, error, give_up, retry_at = None, "", False, now + backoff(notification.attempts)
    try:
        status_code = send(notification)
    except DeliveryError as exc:
        status_code, error = exc.status_code, str(exc)
        give_up = exc.permanent or notification.attempts >= max_attempts()
        if exc.retry_after is not None:
            retry_at = now + timedelta(seconds=exc.retry_after)
        logger.warning("notification %s attempt %s failed: %s", notification.pk, notification.attempts, exc)
    outcome = notification.settled_fields(now=now, error=error, give_up=give_up, retry_at=retry_at)
    DeliveryAttempt.objects.create(
        notification=notification,
        number=notification.attempts,
        attempted_at=now,
        succeeded=not error,
        status_code=status_code,
        error=error,
        next_attempt_at=outcome["next_attempt_at"],
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    Notification.objects.filter(pk=notification.pk).update(last_status=status_code, **outcome)
    if error:
        return DeliveryStatus.GAVE_UP if give_up else "retry"
    return DeliveryStatus.DELIVERED


def deliver_due(*, now: datetime | None = None, limit: int = BATCH) -> int:
    """Beat entry point: attempt every pending notification whose next attempt is due
    (retries, and rows whose task was never published). Returns how many were sent."""
    now = now or timezone.now()
    due = list(
        Notification.objects.filter(delivered_at=None, gave_up_at=None, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    return sum(deliver(pk, now=now) == DeliveryStatus.DELIVERED for pk in due)
