"""How a queued notification leaves the building: email to a group, or a signed
webhook POST through `controlplane.http.outbound` (allow-list checked again before
every attempt, one pinned DNS resolution, no redirects).

Both raise `DeliveryError` on failure; `permanent` means retrying cannot help.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage

from controlplane.http.outbound import OutboundFailed, OutboundURLRefused, signed_post

from ..models import Notification

__all__ = ["EVENT_HEADER", "DeliveryError", "email_text", "post_webhook", "send_email", "webhook_secret"]

EVENT_HEADER = "X-Controlplane-Event"
REQUEST_HEADER = "X-Controlplane-Request"


class DeliveryError(Exception):
    def __init__(
        self, message: str, *, status_code: int | None = None, permanent: bool = False, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.permanent = permanent
        self.retry_after = retry_after  # the receiver's Retry-After, in seconds: wins over the backoff


def webhook_secret() -> bytes:
    """The HMAC key webhook receivers verify with (NOTIFICATION_WEBHOOK_SECRET)."""
    configured = settings.NOTIFICATION_WEBHOOK_SECRET
    if configured:
        return configured.encode()
    return hmac.new(settings.SECRET_KEY.encode(), b"notification-webhook", hashlib.sha256).hexdigest().encode()


SUBJECTS = {
    Notification.Event.ARRIVED: "Approval needed",
    Notification.Event.REMINDER: "Decision due soon",
    Notification.Event.ESCALATED: "Escalated to you",
}


def email_text(payload: dict[str, Any]) -> tuple[str, str]:
    event = payload["event"].removeprefix("request.")
    subject = f"[control plane] {SUBJECTS[event]}: {payload['action_type']} ({payload['risk_level']})"
    lines = [
        f"{SUBJECTS[event]}: {payload['agent']} asks to run {payload['action_type']}.",
        "",
        f"Risk: {payload['risk_level']} (rule: {payload['rule'] or 'policy default'})",
        f"Why: {payload['reason']}",
        f"Decide by: {payload['decide_by'] or '-'}",
    ]
    if payload.get("escalated_to"):
        lines.append(f"Escalated to: {payload['escalated_to']} ({payload.get('escalation_reason', '')})")
    lines += ["", "Params:"]
    for key, value in sorted(payload["params"].items()):
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"  {key}: {shown}")
    if payload["masked_params"]:
        lines.append(f"  (masked: {', '.join(payload['masked_params'])})")
    lines += ["", f"Review it: {payload['url']}"]
    return subject, "\n".join(lines)


def _recipients(group_name: str) -> list[str]:
    return sorted(
        get_user_model()
        .objects.filter(groups__name=group_name, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )


def send_email(notification: Notification) -> int | None:
    recipients = _recipients(notification.destination)
    if not recipients:
        raise DeliveryError(f"nobody in {notification.destination!r} has an email address", permanent=True)
    subject, body = email_text(notification.payload)
    message = EmailMessage(
        subject=subject, body=body, to=recipients, headers={REQUEST_HEADER: notification.payload["request_id"]}
    )
    try:
        message.send(fail_silently=False)
    except Exception as exc:  # SMTP errors are many classes; all are worth a retry
        raise DeliveryError(f"email failed: {exc}") from None
    return None


def post_webhook(notification: Notification) -> int:
    body = json.dumps(notification.payload, sort_keys=True, separators=(",", ":")).encode()
    headers = {EVENT_HEADER: notification.payload["event"], "Idempotency-Key": f"cp-notification-{notification.pk}"}
    try:
        answer = signed_post(
            notification.destination,
            body,
            secret=webhook_secret(),
            timeout=float(settings.NOTIFICATION_WEBHOOK_TIMEOUT),
            headers=headers,
        )
    except OutboundURLRefused as exc:
        raise DeliveryError(f"{exc.code}: {exc.message}", permanent=True) from None
    except OutboundFailed as exc:
        raise DeliveryError(f"webhook failed: {exc}") from None
    if not answer.is_success:
        raise DeliveryError(f"webhook answered {answer.status_code}", status_code=answer.status_code)
    return answer.status_code


def post_slack(notification: Notification) -> int:
    """Direct messages to the approver group's linked Slack reviewers (approvals.chat)."""
    from approvals.chat import posting

    return _slack_call(lambda: posting.notify_group(notification.request, notification.destination))


def _slack_call(call) -> int:
    from slack_sdk.errors import SlackApiError

    from approvals.chat import live

    if not settings.SLACK_BOT_TOKEN:
        raise DeliveryError("Slack is not configured (SLACK_BOT_TOKEN)", permanent=True)
    try:
        call()
    except SlackApiError as exc:
        status = exc.response.status_code
        retry_after = live.retry_after_of(exc) if status == 429 else None
        raise DeliveryError(
            f"Slack answered {status}: {exc.response.get('error')}", status_code=status, retry_after=retry_after
        ) from None
    except OSError as exc:
        raise DeliveryError(f"Slack failed: {exc}") from None
    return 200


def post_slack_stub(notification: Notification) -> int:
    """The rule's Slack channel hears of the request with a stub only (approvals.chat.posting)."""
    from approvals.chat import posting

    return _slack_call(lambda: posting.post_stub(notification.request, notification.destination))
