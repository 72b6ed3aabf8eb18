"""Showing a request in Slack: the direct messages to an approver group's linked reviewers
(the notification outbox's Slack delivery), each remembered as a live message (`live`)."""

from __future__ import annotations

from django.conf import settings

from approvals.models import ApprovalRequest, SlackLink, SlackMessage
from approvals.states import State

from . import live, render, slack


def post_request(request: ApprovalRequest, slack_user_id: str) -> SlackMessage:
    """A direct message showing `request` to one reviewer, remembered for updates. A change
    that committed while it was on its way makes the new row due at once (live.deliver)."""
    shown = request.state
    answer = slack.web_client().chat_postMessage(
        channel=slack_user_id, text=request.action_type, blocks=slack.blocks_for(request)
    )
    message = SlackMessage.objects.create(
        request=request, slack_user_id=slack_user_id, channel=answer["channel"], ts=answer["ts"], shown_state=shown
    )
    if ApprovalRequest.objects.filter(pk=request.pk).exclude(state=shown).exists():
        SlackMessage.objects.filter(pk=message.pk).update(wanted=1)
        try:
            live.deliver(message.pk)
        except live.RateLimited:
            pass  # due at Retry-After; the beat sweep sends it
    return message


def notify_group(request: ApprovalRequest, group_name: str) -> int:
    """The outbox's Slack delivery: a direct message to each linked, active member of the
    approver group not yet shown this request (a retry never posts twice), while it still
    waits for people. Returns how many."""
    if request.state != State.PENDING_APPROVAL:
        return 0
    shown = set(SlackMessage.objects.filter(request=request).values_list("slack_user_id", flat=True))
    links = SlackLink.objects.filter(user__groups__name=group_name, user__is_active=True)
    if settings.SLACK_TEAM_ID:
        links = links.filter(team_id=settings.SLACK_TEAM_ID)
    sent = 0
    for slack_user_id in sorted(set(links.values_list("slack_user_id", flat=True)) - shown):
        post_request(request, slack_user_id)
        sent += 1
    return sent


def post_stub(request: ApprovalRequest, channel: str) -> None:
    """A channel hears of a waiting request with a stub only (`render.stub`); no buttons,
    so nobody decides from a channel."""
    if request.state != State.PENDING_APPROVAL:
        return
    blocks = render.stub(request, slack.card_url(request))
    slack.web_client().chat_postMessage(
        channel=channel, text=f"{request.action_type} waits for a decision", blocks=blocks
    )
