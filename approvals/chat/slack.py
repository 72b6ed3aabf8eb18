"""The Slack side: the SDK's verifier and Web API client, the blocks that show a request
(rendered from the database), the Reject modal and the ephemeral answers."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.conf import settings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.webhook import WebhookClient

from approvals.models import ApprovalRequest
from approvals.services.guards import rule_asks_step_up
from approvals.services.step_up import needs_step_up
from approvals.states import State
from controlplane.http.outbound import OutboundURLRefused, check_url

from . import render

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024  # Slack's interaction payloads are a few kilobytes
APPROVE, REJECT = "approve", "reject"
FEEDBACK_VIEW = "reject_feedback"  # the modal's callback_id
FEEDBACK_BLOCK, FEEDBACK_INPUT = "feedback", "feedback"
FEEDBACK_MAX = 3000  # Slack's plain_text_input bound; the core allows more
# Slack's trigger_id lives 3 s after the click, and Slack waits 3 s for the acknowledgement.
MODAL_TIMEOUT_SECONDS = 2


def verifier() -> SignatureVerifier:
    return SignatureVerifier(settings.SLACK_SIGNING_SECRET)


def api_url() -> str:
    """`SLACK_API_URL` once it passes the outbound rules (allow-list, every resolved address
    public unless allowed), checked at each client built; else OutboundURLRefused, logged
    as an error: nothing is sent to a Web API base the operator did not allow."""
    try:
        check_url(settings.SLACK_API_URL)
    except OutboundURLRefused as refused:
        logger.error("Slack Web API base refused (%s): %s", refused.code, refused.message)
        raise
    return settings.SLACK_API_URL


def web_client() -> WebClient:
    return WebClient(token=settings.SLACK_BOT_TOKEN, base_url=api_url(), timeout=10)


def button_value(request_id: str, revision: int) -> str:
    return f"{request_id}:{revision}"


def read_button_value(value: str) -> tuple[str, int] | None:
    request_id, _, revision = value.partition(":")
    try:
        request_id = str(uuid.UUID(request_id))
    except ValueError:
        return None
    if not revision.isdigit() or len(revision) > 9:
        return None
    return request_id, int(revision)


def blocks_for(request: ApprovalRequest) -> list[dict[str, Any]]:
    """The request as the database says now: buttons while it waits, the outcome after."""
    blocks = render.describe(request)
    if request.state == State.PENDING_APPROVAL:
        value = button_value(str(request.pk), request.current_revision)
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    approve_button(request, value),
                    {
                        "type": "button",
                        "action_id": REJECT,
                        "style": "danger",
                        "value": value,
                        "text": {"type": "plain_text", "text": "Reject"},
                    },
                    {
                        "type": "button",
                        "action_id": "open",
                        "url": card_url(request),
                        "text": {"type": "plain_text", "text": "Open"},
                    },
                ],
            }
        )
    else:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": render.outcome(request)}]})
    return blocks


def approve_button(request: ApprovalRequest, value: str) -> dict[str, Any]:
    """Approve, or for a level that needs a step-up (never proved in chat) a button that
    opens the card in the browser, where the passkey or code is asked."""
    if needs_step_up(request.risk_level, rule_asks=rule_asks_step_up(request)):
        text = {"type": "plain_text", "text": "Approve in the browser"}
        return {"type": "button", "action_id": "open_to_approve", "url": card_url(request), "text": text}
    text = {"type": "plain_text", "text": "Approve"}
    return {"type": "button", "action_id": APPROVE, "style": "primary", "value": value, "text": text}


def card_url(request: ApprovalRequest) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/requests/{request.pk}/"


def feedback_modal(value: str, response_url: str) -> dict[str, Any]:
    """The Reject modal: no database read (it is opened in the acknowledgement); the button's
    value and the press's response_url ride in private_metadata, back in the signed submission."""
    return {
        "type": "modal",
        "callback_id": FEEDBACK_VIEW,
        "private_metadata": json.dumps({"value": value, "response_url": response_url})[:3000],
        "title": {"type": "plain_text", "text": "Reject"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": FEEDBACK_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "Feedback for the agent"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": FEEDBACK_INPUT,
                    "multiline": True,
                    "max_length": FEEDBACK_MAX,
                },
            }
        ],
    }


def open_feedback_modal(trigger_id: str, value: str, response_url: str) -> str:
    """views.open the Reject modal; returns "" when it opened, else Slack's error.
    Blocking: the (async) view runs it on a worker thread, never on the event loop."""
    try:
        client = WebClient(
            token=settings.SLACK_BOT_TOKEN,
            base_url=api_url(),
            timeout=MODAL_TIMEOUT_SECONDS,
            retry_handlers=[],  # no second try: the trigger_id would be dead by then
        )
        client.views_open(trigger_id=trigger_id, view=feedback_modal(value, response_url))
    except SlackApiError as refused:
        return str(refused.response.get("error") or refused.response.status_code)
    except OSError as failed:  # timeouts and connection errors
        return type(failed).__name__
    except OutboundURLRefused as refused:
        return refused.code
    return ""


def answer_privately(response_url: str, text: str) -> None:
    """An ephemeral answer to the person who pressed, only to Slack's own response host."""
    if not response_url.startswith(settings.SLACK_RESPONSE_URL_PREFIX):
        logger.warning("refused a response_url outside %s", settings.SLACK_RESPONSE_URL_PREFIX)
        return
    WebhookClient(response_url, timeout=10).send(text=text[:2900], response_type="ephemeral", replace_original=False)
