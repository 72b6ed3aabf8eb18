"""The Python client's suspension helper (`submit_suspension`): seed 002's approval step,
submitted and answered through the client, in process (the guards' loopback suspension_proxy)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from approvals import services
from approvals.people import Person
from hitl_controlplane.client import ApprovalRejected, ControlPlane, DecisionRefused
from tests.guards.client_binding_story import Proxy

from .conftest import APPROVAL_STEP

pytestmark = pytest.mark.django_db

STEP = {key: APPROVAL_STEP[key] for key in ("workflow_id", "step_id", "run_id", "summary")}


class SuspensionProxy(Proxy):
    """The guards' suspension_proxy; `on_suspended(id)` runs when a suspension's submission answer passes."""

    on_suspended: Callable[[str], object] | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path == "/api/v1/suspensions/" and response.status_code == 201 and self.on_suspended:
            self.on_suspended(json.loads(response.read())["id"])
        return response


@pytest.fixture
def suspension_proxy() -> SuspensionProxy:
    return SuspensionProxy()


@pytest.fixture
def suspension_cp(token, suspension_proxy, server_public_key):
    with ControlPlane(
        "http://testserver",
        token,
        poll_wait=0.2,
        retries=0,
        transport=suspension_proxy,
        public_keys=[server_public_key],
    ) as client:
        yield client


def submit(suspension_cp: ControlPlane):
    return suspension_cp.submit_suspension(
        APPROVAL_STEP["title"], APPROVAL_STEP["suspend_payload"], APPROVAL_STEP["resume_schema"], timeout=10, **STEP
    )


def test_the_answer_comes_back_exactly_as_validated(suspension_cp, suspension_proxy, big_amounts, people):
    alice = Person(people["alice"])
    suspension_proxy.on_suspended = lambda request_id: services.respond_to_suspension(
        request_id, actor=alice, resume_data={"approved": True}, revision=1
    )
    assert submit(suspension_cp) == {"approved": True}


def test_a_rejection_raises_with_the_reviewers_feedback(suspension_cp, suspension_proxy, big_amounts, people):
    alice = Person(people["alice"])
    suspension_proxy.on_suspended = lambda request_id: services.reject(
        request_id, actor=alice, revision=1, feedback="Call finance first."
    )
    with pytest.raises(ApprovalRejected) as rejected:
        submit(suspension_cp)
    assert rejected.value.feedback == "Call finance first."


def test_an_answer_altered_in_transit_is_refused(suspension_cp, suspension_proxy, big_amounts, people):
    alice = Person(people["alice"])
    suspension_proxy.on_suspended = lambda request_id: services.respond_to_suspension(
        request_id, actor=alice, resume_data={"approved": False}, revision=1
    )

    def flip(body, path):
        if body.get("decided"):
            body["resume_data"] = {"approved": True}
        return body

    suspension_proxy.resume = flip
    with pytest.raises(DecisionRefused):
        submit(suspension_cp)
