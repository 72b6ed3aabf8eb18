"""The worker's side of a Slack button: the linked person decides through the one
decision adapter (`approvals.decide`), every guard in the core; the answer is ephemeral."""

from __future__ import annotations

import json
import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from approvals import decide, errors
from approvals.errors import DomainError
from approvals.models import SlackLink
from approvals.people import Person

from . import live, slack, vouching

logger = logging.getLogger(__name__)
LINK_YOUR_ACCOUNT = "Link your account first: run /approvals-link and confirm it in the browser."
CHANGED = "This request changed since this message was sent: reopen it."
FEEDBACK_FORM_FAILED = (
    "Could not open the feedback form ({}); nothing was decided. Press Reject again or decide in the browser."
)


def linked_user(user: dict[str, Any]) -> Any | None:
    """The active user a Slack identity is linked to, or None (other workspaces too)."""
    team_id = str(user.get("team_id", ""))
    if settings.SLACK_TEAM_ID and team_id != settings.SLACK_TEAM_ID:
        return None
    link = (
        SlackLink.objects.select_related("user")
        .filter(
            enterprise_id=str(user.get("enterprise_id") or ""), team_id=team_id, slack_user_id=str(user.get("id", ""))
        )
        .first()
    )
    return link.user if link is not None and link.user.is_active else None


def pressed(payload: dict[str, Any]) -> tuple[str, str, str] | None:
    """(verdict, button value, feedback) of an Approve press or a Reject modal's submission.
    A Reject press itself decides nothing: it opened the modal (views.interactivity)."""
    if payload.get("type") == "view_submission":
        view = payload.get("view") or {}
        if view.get("callback_id") != slack.FEEDBACK_VIEW:
            return None
        try:
            metadata = json.loads(view.get("private_metadata") or "{}")
            typed = view["state"]["values"][slack.FEEDBACK_BLOCK][slack.FEEDBACK_INPUT].get("value")
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if not isinstance(metadata, dict):
            return None
        return decide.REJECT, str(metadata.get("value", "")), str(typed or "")[: slack.FEEDBACK_MAX]
    actions = payload.get("actions") or []
    if not actions or not isinstance(actions[0], dict) or actions[0].get("action_id") != slack.APPROVE:
        return None
    return decide.APPROVE, str(actions[0].get("value", "")), ""


def response_url_of(payload: dict[str, Any]) -> str:
    """Where the ephemeral answer goes: the press's, or for a modal the press that opened it."""
    if payload.get("type") == "view_submission":
        try:
            metadata = json.loads((payload.get("view") or {}).get("private_metadata") or "{}")
        except (ValueError, AttributeError):
            return ""
        return str(metadata.get("response_url", "")) if isinstance(metadata, dict) else ""
    return str(payload.get("response_url", ""))


def decide_from_slack(payload: dict[str, Any]) -> str:
    """Decide what the pressed button (or the Reject modal) says, as the linked person;
    returns the answer shown."""
    user = linked_user(payload.get("user") or {})
    if user is None:
        return LINK_YOUR_ACCOUNT
    what = pressed(payload)
    if what is None:
        return "Nothing to do."
    verdict, value, feedback = what
    read = slack.read_button_value(value)
    if read is None:
        return "This button is not one of ours."
    request_id, revision = read
    refused_identity = vouching.refusal(user)
    if refused_identity:
        return refused_identity
    try:
        decision = decide.Decision(request_id, verdict, revision, feedback)
        decided = decide.decide(decision, actor=Person(user), user=user)
    except DomainError as refused:
        if refused.code == errors.REVISION_CHANGED:
            return CHANGED
        if refused.code == errors.STEP_UP_REQUIRED:
            return f"This request needs a step-up: decide it in the browser, {settings.SITE_URL}"
        return refused.message
    return decide.decided_message(decided.request, "approval" if verdict == decide.APPROVE else "rejection")


@shared_task(name="approvals.chat.slack_action", ignore_result=True, acks_late=True)
def slack_action(payload: dict[str, Any]) -> str:
    text = decide_from_slack(payload)
    slack.answer_privately(response_url_of(payload), text)
    return text


@shared_task(name="approvals.chat.answer", ignore_result=True)
def answer(response_url: str, text: str) -> None:
    slack.answer_privately(response_url, text)


@shared_task(name="approvals.chat.update_messages", ignore_result=True, bind=True, max_retries=None)
def update_slack_messages(self, request_id: str) -> int:
    """The request's due messages, rendered from the database now. On Slack's 429 the task
    comes back after Retry-After (a countdown, no worker sleeps); the beat sweep catches
    whatever a lost task leaves."""
    try:
        return live.deliver_request(request_id)
    except live.RateLimited as limited:
        raise self.retry(countdown=limited.retry_after) from None


@shared_task(name="approvals.chat.sweep_messages", ignore_result=True)
def sweep_slack_messages() -> int:
    due = live.sweep()
    for request_id in due:
        update_slack_messages.delay(request_id)
    return len(due)


def beat_schedule() -> dict[str, dict[str, Any]]:
    return {"slack-messages-sweep": {"task": "approvals.chat.sweep_messages", "schedule": 60.0}}


def on_request_changed(sender, *, change, **kwargs) -> None:
    """`request_changed` subscriber (after commit): every Slack message of the request wants
    a fresh rendering, sent on the worker. Slack or the broker down never reaches the
    decision that caused it; the beat sweep sends what could not be queued."""
    try:
        if live.mark_changed(change.request_id):
            update_slack_messages.delay(change.request_id)
    except Exception:
        logger.exception("could not queue the Slack update of %s", change.request_id)
