"""Signed callbacks: a request's decision POSTed to the `callback_url` its agent gave.

The database drives delivery: after a change commits, a CallbackDelivery row is
created for the new state (once per state); `deliver_due_callbacks()` (Celery
task `agents.deliver_due_callbacks`, run by beat and nudged after each change)
sends what is due, records every attempt, and reschedules failures with
exponential backoff until CALLBACK_MAX_ATTEMPTS. Redirects are not followed and
the URL is checked against the outbound allow-list again before every attempt.

Sending goes through `controlplane.http.outbound.signed_post` (allow-list, one
pinned DNS resolution, no redirects), signed with the agent's `callback_secret`:
`X-Controlplane-Timestamp` and `X-Controlplane-Signature` as documented there
and in docs/agents.md; receivers check with `outbound.verify_signature`.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from uuid import UUID

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import RequestChange
from approvals.states import State
from controlplane.http.outbound import OutboundFailed, OutboundURLRefused, backoff, signed_post

from .models import CallbackAttempt, CallbackDelivery, RequestCallback
from .resume import resume_payload

__all__ = [
    "CALLBACK_STATES",
    "deliver_due_callbacks",
    "enqueue_callback",
    "on_request_changed",
]

logger = logging.getLogger(__name__)

# The states an agent hears about: its decision, then its execution's outcome.
CALLBACK_STATES = frozenset(
    {State.APPROVED, State.REJECTED, State.EXPIRED, State.CANCELLED, State.SUCCEEDED, State.FAILED}
)
DELIVERY_HEADER = "X-Controlplane-Delivery"


def enqueue_callback(request_id: str, state: str) -> CallbackDelivery | None:
    """Create the delivery of `state` for the request's callback (once per state); None if it has none."""
    # `request_id` is always a request's own str(pk), so it parses as its field would.
    callback = RequestCallback.objects.select_related("request__agent").filter(request_id=UUID(request_id)).first()
    if callback is None or state not in CALLBACK_STATES:
        return None
    request = callback.request
    payload = {"event": "request.changed", **resume_payload(request)}
    payload["state"] = state  # the state this delivery announces, even if the request moved on since
    try:
        with transaction.atomic():
            delivery, _ = CallbackDelivery.objects.get_or_create(
                request=request,
                state=state,
                defaults={"destination": callback.url, "payload": payload, "next_attempt_at": timezone.now()},
            )
    except IntegrityError:  # a concurrent enqueue won
        delivery = CallbackDelivery.objects.get(request=request, state=state)
    return delivery


DELIVER_TASK = "agents.deliver_due_callbacks"  # agents.tasks.deliver_due_callbacks_task


def on_request_changed(sender, *, change: RequestChange, **kwargs) -> None:
    """`request_changed` subscriber (runs after commit): queue the callback and nudge the worker."""
    if not change.is_transition or change.to_state not in CALLBACK_STATES:
        return
    if enqueue_callback(change.request_id, change.to_state) is None:
        return
    if settings.CALLBACK_PUSH_TASK:
        try:
            # By name: the task module imports this one, never the other way round.
            current_app.send_task(DELIVER_TASK)
        except Exception:  # the beat sweep delivers it anyway
            logger.warning("could not enqueue callback delivery task", exc_info=True)


def _enqueue_missing(limit: int) -> int:
    """Deliveries a crash between commit and the subscriber never created."""
    missing = (
        ApprovalRequest.objects.filter(state__in=CALLBACK_STATES, callback__isnull=False)
        .exclude(Exists(CallbackDelivery.objects.filter(request_id=OuterRef("pk"), state=OuterRef("state"))))
        .values_list("pk", "state")[:limit]
    )
    return sum(enqueue_callback(str(rid), state) is not None for rid, state in missing)


def _claim_due(now, limit: int) -> list[int]:
    """Take due rows so no other worker sends them at the same time (a lease on next_attempt_at)."""
    lease = timedelta(seconds=settings.CALLBACK_TIMEOUT_SECONDS + 30)
    with transaction.atomic():
        rows = list(
            CallbackDelivery.objects.select_for_update(skip_locked=True)
            .filter(next_attempt_at__lte=now)
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)[:limit]
        )
        CallbackDelivery.objects.filter(pk__in=rows).update(next_attempt_at=now + lease)
    return rows


def _attempt(delivery: CallbackDelivery) -> None:
    body = json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()
    number = delivery.attempts + 1
    status, error = None, ""
    started = time.monotonic()
    try:
        answer = signed_post(
            delivery.destination,
            body,
            secret=delivery.request.agent.callback_secret,
            timeout=settings.CALLBACK_TIMEOUT_SECONDS,
            headers={DELIVERY_HEADER: str(delivery.pk)},
        )
        status = answer.status_code
        if not answer.is_success:
            error = f"HTTP {status}" + (" (redirects are not followed)" if answer.is_redirect else "")
    except OutboundURLRefused as exc:
        error = f"{exc.code}: {exc.message}"
    except OutboundFailed as exc:
        error = str(exc)
    now = timezone.now()
    retry_at = now + backoff(number, base=settings.CALLBACK_RETRY_BASE_SECONDS, cap=settings.CALLBACK_RETRY_MAX_SECONDS)
    outcome = delivery.settled_fields(
        now=now, error=error, give_up=number >= settings.CALLBACK_MAX_ATTEMPTS, retry_at=retry_at
    )
    CallbackAttempt.objects.create(
        delivery=delivery,
        number=number,
        attempted_at=now,
        succeeded=not error,
        status_code=status,
        error=error,
        next_attempt_at=outcome["next_attempt_at"],
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    CallbackDelivery.objects.filter(pk=delivery.pk).update(attempts=number, last_status=status, **outcome)


def deliver_due_callbacks(*, now=None, limit: int = 100) -> int:
    """Send every callback that is due; returns how many attempts were made."""
    _enqueue_missing(limit)
    now = now or timezone.now()
    due = _claim_due(now, limit)
    for delivery in CallbackDelivery.objects.select_related("request__agent").filter(pk__in=due):
        _attempt(delivery)
    return len(due)
