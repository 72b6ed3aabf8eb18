"""Resuming: the payload an agent resumes with, and the long-poll that waits for it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.test import AsyncClient
from freezegun import freeze_time

from agents.resume import PLAN_APPROVED_TEXT
from approvals import services
from tests.api.conftest import EMAIL, PLAN_MD
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

# Only bounds how long a broken test hangs; no assertion depends on how long anything takes.
HANG_GUARD_SECONDS = 30


def _resume(api, request_id: str, wait: float = 0) -> dict:
    response = api.get(f"/api/v1/requests/{request_id}/resume/", {"wait": wait})
    assert response.status_code == 200, response.content
    return response.json()


def _plan(api, **extra) -> str:
    return api.post("/api/v1/plans/", {"path": "plans/auth.md", "plan": PLAN_MD, **extra}, format="json").json()["id"]


def _email(api) -> str:
    return api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]


def test_an_undecided_request_has_no_resume_data(api):
    request_id = _email(api)
    assert _resume(api, request_id) == {
        "request_id": request_id,
        "state": "pending_approval",
        "decided": False,
        "resume_data": None,
        "tool_result": None,
    }


def test_an_approved_plan_resumes_with_mastras_text_verbatim(api, people):
    request_id = _plan(api)
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    body = _resume(api, request_id)
    assert body["state"] == "approved"
    assert body["tool_result"] == "Plan approved. Proceed with implementation following the approved plan."
    assert body["tool_result"] == PLAN_APPROVED_TEXT
    assert body["resume_data"] == {
        "action": "approved",
        "path": "plans/auth.md",
        "title": "Refactor the auth module",
        "plan": PLAN_MD,
    }


def test_a_plan_rejected_with_feedback_asks_to_revise_and_resubmit(api, people):
    request_id = _plan(api)
    services.reject(
        request_id,
        revision=current_revision(request_id),
        actor=services.Person(people["alice"]),
        feedback="Add error handling steps",
    )
    body = _resume(api, request_id)
    assert body["resume_data"]["action"] == "rejected"
    assert body["resume_data"]["feedback"] == "Add error handling steps"
    # Mastra's submit_plan text, byte for byte (DESIGN.md, "Agent-facing contract").
    assert body["tool_result"] == (
        "Plan was not approved. The user wants revisions.\n\nUser feedback: Add error handling steps\n\n"
        "Please revise the plan based on the feedback and submit again with submit_plan."
    )


def test_a_plan_rejected_without_feedback_says_to_wait_for_the_user(api, people):
    request_id = _plan(api)
    services.reject(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    body = _resume(api, request_id)
    assert body["resume_data"] == {
        "action": "rejected",
        "path": "plans/auth.md",
        "title": "Refactor the auth module",
        "plan": PLAN_MD,
    }
    assert body["tool_result"] == (
        "Plan was not approved. The user will send revision instructions in their next message. "
        "Stop now and wait for the user to provide feedback before revising the plan."
    )


def test_an_action_approved_with_edits_resumes_with_the_edited_params(api, people, two_person_rule):
    request_id = api.post(
        "/api/v1/actions/", {"action_type": "transfer_funds", "params": {"amount": 900, "to": "acme"}}, format="json"
    ).json()["id"]
    services.approve_with_edits(
        request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]), edits={"amount": 500}
    )
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["bob"]))
    body = _resume(api, request_id)
    assert body["resume_data"] == {"action": "approved", "params": {"amount": 500, "to": "acme"}}
    assert '"amount": 500' in body["tool_result"] and "exactly" in body["tool_result"]


def test_a_rejected_action_says_not_to_retry_unchanged(api, people):
    request_id = _email(api)
    services.reject(
        request_id,
        revision=current_revision(request_id),
        actor=services.Person(people["alice"]),
        feedback="Wrong recipient",
    )
    body = _resume(api, request_id)
    assert body["resume_data"] == {"action": "rejected", "feedback": "Wrong recipient"}
    assert "Wrong recipient" in body["tool_result"] and "Do not retry the same call unchanged" in body["tool_result"]


def test_an_expired_request_resumes_as_rejected_and_state_says_expired(api):
    request_id = _email(api)
    with freeze_time(timedelta(days=2)):
        body = _resume(api, request_id)
    assert body["state"] == "expired"
    assert body["resume_data"]["action"] == "rejected"
    assert "expired" in body["resume_data"]["feedback"]


def test_a_cancelled_request_resumes_as_rejected_and_state_says_cancelled(api):
    request_id = _email(api)
    api.post(f"/api/v1/requests/{request_id}/cancel/", {"reason": "user changed their mind"}, format="json")
    body = _resume(api, request_id)
    assert body["state"] == "cancelled"
    assert body["resume_data"] == {
        "action": "rejected",
        "feedback": "The request was cancelled by the agent: user changed their mind",
    }


@pytest.mark.parametrize("wait", ["-1", "abc", "nan"])
def test_a_bad_wait_is_422(api, wait):
    response = api.get(f"/api/v1/requests/{_email(api)}/resume/", {"wait": wait})
    assert response.status_code == 422 and response.json()["code"] == "validation_error"


@dataclass
class LongPollWaits:
    """What the long-polls in this process waited for, seen from the channel layer."""

    parked: asyncio.Event = field(default_factory=asyncio.Event)  # a poll is waiting for news
    woken_by: list[dict[str, Any]] = field(default_factory=list)  # the news that woke a poll
    ran_out: int = 0  # waits that ended with the poll's own timeout


@pytest.fixture
def long_poll_waits(monkeypatch) -> LongPollWaits:
    """Watch the long-poll's wait on the channel layer: the moment it parks, and what ends it."""
    layer = get_channel_layer()
    receive = layer.receive
    waits = LongPollWaits()

    async def watched_receive(channel: str) -> dict[str, Any]:
        if not channel.startswith("resume."):
            return await receive(channel)
        waits.parked.set()
        try:
            message = await receive(channel)
        except asyncio.CancelledError:  # the poll's own timeout cancels the wait
            waits.ran_out += 1
            raise
        waits.woken_by.append(message)
        return message

    monkeypatch.setattr(layer, "receive", watched_receive)
    return waits


@pytest.mark.django_db(transaction=True)
def test_the_long_poll_returns_when_the_decision_lands(token, people, api, long_poll_waits):
    request_id = _email(api)
    client = AsyncClient()

    async def scenario() -> dict:
        waiting = asyncio.ensure_future(
            client.get(
                f"/api/v1/requests/{request_id}/resume/", {"wait": "10"}, headers={"Authorization": f"Bearer {token}"}
            )
        )
        await asyncio.wait_for(long_poll_waits.parked.wait(), HANG_GUARD_SECONDS)  # the server holds the poll
        assert not waiting.done()
        await sync_to_async(services.reject)(
            request_id, revision=1, actor=services.Person(people["alice"]), feedback="not today"
        )
        response = await asyncio.wait_for(waiting, HANG_GUARD_SECONDS)
        return response.json()

    body = async_to_sync(scenario)()
    assert body["state"] == "rejected" and body["resume_data"]["feedback"] == "not today"
    # It answered because the decision's push woke it, not because its 10 s ran out.
    assert len(long_poll_waits.woken_by) == 1 and long_poll_waits.ran_out == 0


@pytest.mark.django_db(transaction=True)
def test_the_long_poll_times_out_undecided(api, long_poll_waits):
    request_id = _email(api)
    body = _resume(api, request_id, wait=0.5)
    assert body["decided"] is False and body["state"] == "pending_approval"
    # It waited for news, heard none, and answered when its own wait ran out.
    assert long_poll_waits.parked.is_set() and long_poll_waits.woken_by == [] and long_poll_waits.ran_out == 1
