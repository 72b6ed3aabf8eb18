"""The worker's side of a Slack button: the linked person decides through the one
decision adapter (`approvals.decide`), every guard in the core; the answer is ephemeral."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from approvals import decide, errors
from approvals.errors import DomainError
from approvals.models import SlackLink, SlackMessage
from approvals.people import Person

from . import slack

logger = logging.getLogger(__name__)
LINK_YOUR_ACCOUNT = "Link your account first: run /approvals-link and confirm it in the browser."
CHANGED = "This request changed since this message was sent: reopen it."


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


def decide_from_slack(payload: dict[str, Any]) -> str:
    """Decide what the pressed button says, as the linked person; returns the answer shown."""
    actions = payload.get("actions") or []
    user = linked_user(payload.get("user") or {})
    if user is None:
        return LINK_YOUR_ACCOUNT
    if not actions or actions[0].get("action_id") not in (slack.APPROVE, slack.REJECT):
        return "Nothing to do."
    read = slack.read_button_value(str(actions[0].get("value", "")))
    if read is None:
        return "This button is not one of ours."
    request_id, revision = read
    verdict = decide.APPROVE if actions[0]["action_id"] == slack.APPROVE else decide.REJECT
    try:
        decided = decide.decide(decide.Decision(request_id, verdict, revision), actor=Person(user), user=user)
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
    slack.answer_privately(str(payload.get("response_url", "")), text)
    return text


@shared_task(name="approvals.chat.update_messages", ignore_result=True)
def update_slack_messages(request_id: str) -> int:
    return slack.update_messages(request_id)


def on_request_changed(sender, *, change, **kwargs) -> None:
    """`request_changed` subscriber: a request that has Slack messages gets them updated,
    on the worker, rendered from the database when sent."""
    if not SlackMessage.objects.filter(request_id=change.request_id).exists():
        return
    try:
        update_slack_messages.delay(change.request_id)
    except Exception:  # Slack or the broker down must never break the decision that caused it
        logger.exception("could not queue the Slack update of %s", change.request_id)
