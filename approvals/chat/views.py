"""Slack's requests (signed, acknowledged at once, the work queued on the worker) and the
web session's side of linking (the signed-in person confirms the exact Slack identity)."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from approvals.models import SlackLink, SlackLinkStart
from approvals.people import Person
from audit.chain import record
from controlplane.http.codes import register
from controlplane.http.errors import json_error

from . import slack
from .tasks import FEEDBACK_FORM_FAILED, answer, slack_action

SLACK_SIGNATURE_INVALID = register(
    "slack_signature_invalid", 401, "The Slack request's signature or timestamp (five minutes) did not verify."
)
SLACK_PAYLOAD_TOO_LARGE = register("slack_payload_too_large", 413, "The Slack request's body is too large.")
SLACK_PAYLOAD_INVALID = register("slack_payload_invalid", 400, "The Slack request's payload is not one we read.")
LINK_SECONDS = 600


def _verified(request) -> JsonResponse | None:
    if int(request.headers.get("Content-Length") or 0) > slack.MAX_BODY or len(request.body) > slack.MAX_BODY:
        return json_error(SLACK_PAYLOAD_TOO_LARGE, "The body is over 64 KiB.")
    ok = settings.SLACK_SIGNING_SECRET and slack.verifier().is_valid(
        body=request.body,
        timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
        signature=request.headers.get("X-Slack-Signature", ""),
    )
    return None if ok else json_error(SLACK_SIGNATURE_INVALID, "The Slack signature did not verify.")


READ_PAYLOADS = ("block_actions", "view_submission")


def _off_the_loop(function):
    """A slow blocking call (Slack's Web API, up to its 2 s timeout) on a thread of its own:
    never the event loop, nor the one thread Django runs sync views in."""
    return sync_to_async(function, thread_sensitive=False)


async def _queue(task, *args) -> None:
    """Publish to the broker (a millisecond) on Django's sync thread, where an eager task
    (the unit tests) sees the same database connection as the request."""
    await sync_to_async(task.delay)(*args)


@csrf_exempt
@require_POST
async def interactivity(request):
    """A button press or the Reject modal's submission: verified, queued, acknowledged, with
    no database work here. Reject opens the feedback modal inline, since its trigger_id dies
    3 s after the click; the submission decides on the worker."""
    refused = _verified(request)
    if refused is not None:
        return refused
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or payload.get("type") not in READ_PAYLOADS:
        return json_error(SLACK_PAYLOAD_INVALID, "Only block_actions and view_submission payloads are read.")
    action = (payload.get("actions") or [{}])[0]
    if payload["type"] == "block_actions" and isinstance(action, dict) and action.get("action_id") == slack.REJECT:
        response_url = str(payload.get("response_url", ""))
        failed = await _off_the_loop(slack.open_feedback_modal)(
            str(payload.get("trigger_id", "")), str(action.get("value", "")), response_url
        )
        if failed:  # nothing is decided: a Reject without its feedback form is not a Reject
            await _queue(answer, response_url, FEEDBACK_FORM_FAILED.format(failed))
        return HttpResponse(status=200)
    await _queue(slack_action, payload)
    return HttpResponse(status=200)  # an empty 200 also closes the modal


@csrf_exempt
@require_POST
def link_command(request):
    """/approvals-link: a one-time link for the Slack user who ran it, to confirm signed in."""
    refused = _verified(request)
    if refused is not None:
        return refused
    team_id = request.POST.get("team_id", "")[:32]
    if settings.SLACK_TEAM_ID and team_id != settings.SLACK_TEAM_ID:
        return JsonResponse(
            {"response_type": "ephemeral", "text": "This workspace is not linked to the control plane."}
        )
    token = secrets.token_urlsafe(32)
    SlackLinkStart.objects.create(
        token_sha256=hashlib.sha256(token.encode()).hexdigest(),
        enterprise_id=request.POST.get("enterprise_id", "")[:32],
        team_id=team_id,
        slack_user_id=request.POST.get("user_id", "")[:32],
        expires_at=timezone.now() + timedelta(seconds=LINK_SECONDS),
    )
    url = f"{settings.SITE_URL.rstrip('/')}/slack/link/{token}/"
    return JsonResponse({"response_type": "ephemeral", "text": f"Open {url} signed in to link this Slack account."})


@login_required
def confirm_link(request, token: str):
    """The signed-in person sees the exact Slack identity and confirms it (POST)."""
    start = get_object_or_404(
        SlackLinkStart,
        token_sha256=hashlib.sha256(token.encode()).hexdigest(),
        used_at__isnull=True,
        expires_at__gt=timezone.now(),
    )
    if request.method != "POST":
        return render(request, "slack/confirm_link.html", {"start": start})
    with transaction.atomic():
        if not SlackLinkStart.objects.filter(pk=start.pk, used_at__isnull=True).update(used_at=timezone.now()):
            raise Http404  # confirmed meanwhile, by another tab
        SlackLink.objects.update_or_create(
            enterprise_id=start.enterprise_id,
            team_id=start.team_id,
            slack_user_id=start.slack_user_id,
            defaults={"user": request.user},
        )
        record(
            "auth.chat_linked",
            actor=Person.from_request(request),
            metadata={
                "enterprise_id": start.enterprise_id,
                "team_id": start.team_id,
                "slack_user_id": start.slack_user_id,
            },
        )
    identity = f"enterprise {start.enterprise_id or '-'}, workspace {start.team_id}, user {start.slack_user_id}"
    messages.success(request, f"Linked Slack {identity}.")
    return redirect("slack-links")


@login_required
def links(request):
    """The signed-in person's Slack identities (their profile's Slack part), to unlink."""
    mine = SlackLink.objects.filter(user=request.user).order_by("linked_at", "pk")
    return render(request, "slack/links.html", {"links": mine})


@login_required
@require_POST
def unlink(request):
    """Every Slack identity of the signed-in person stops deciding at once."""
    with transaction.atomic():
        removed, _ = SlackLink.objects.filter(user=request.user).delete()
        if removed:
            record("auth.chat_unlinked", actor=Person.from_request(request), metadata={"links": removed})
    if request.POST.get("next") == "links":  # the form on the Slack page
        messages.success(request, "Unlinked every Slack account." if removed else "No Slack account was linked.")
        return redirect("slack-links")
    return JsonResponse({"unlinked": removed})
