"""A decision that names no revision is 422 `revision_required` on every kind (approve, reject,
approve with edits, a reply in place of the tool, a suspension's answer) and every path (the
JSON API, the dashboard's form and the page script's JSON, a batch), before anything is read.
"""

from __future__ import annotations

import inspect

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import errors, services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State
from tests.api.conftest import bearer
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this module)
from tests.identity.conftest import enroll_totp, local_provider, nobody_required, sign_in, totp_code  # noqa: F401
from tests.identity.test_provider_step_up import back_from_the_provider, sso_alice, step_up_provider, to_the_provider  # noqa: F401
from tests.suspensions.conftest import APPROVAL_STEP

from .revision_story import JSON_ACCEPT, assert_refused, snapshot

# Step-up failure counters and spent codes live in the cache (`fresh_counters`, autouse
# here), and no group requires a second factor at sign-in (`nobody_required`).
pytestmark = pytest.mark.usefixtures("nobody_required")


def test_every_decision_service_takes_the_revision_as_a_required_keyword():
    for decide in (
        services.approve,
        services.reject,
        services.approve_with_edits,
        services.respond_instead,
        services.respond_to_suspension,
    ):
        revision = inspect.signature(decide).parameters["revision"]
        assert (revision.kind, revision.default) == (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty), decide


@pytest.mark.parametrize("given", [None, 0, -1, True, "1", 1.0])
def test_a_service_call_without_a_revision_number_is_refused_before_anything_is_read(submit, people, given):
    request = submit("send_email")
    with pytest.raises(DomainError) as refused:
        services.approve(request.pk, actor=Person(people["alice"]), revision=given)
    assert (refused.value.code, refused.value.http_status) == (errors.REVISION_REQUIRED, 422)
    assert snapshot(request)[0] == State.PENDING_APPROVAL


@pytest.fixture
def every_kind(submit, treasury_wire, token):
    """One pending request of each decision kind: (decision, extra fields, request)."""
    agent_api = bearer(token)
    suspended = agent_api.post("/api/v1/suspensions/", APPROVAL_STEP, format="json")
    assert suspended.status_code == 201, suspended.json()
    return {
        "approve": ("approve", {}, submit("send_email")),
        "reject": ("reject", {"feedback": "no"}, submit("send_email")),
        "approve with edits": ("approve", {"edits": {"amount": 200}}, treasury_wire(100)),
        "reply instead": (
            "respond",
            {"message": "Use the shared outbox."},
            submit("ask_user", params={"q": "Which mailbox?"}, allowed_decisions=["respond"]),
        ),
        "suspension answer": (
            "respond",
            {"answer": {"approved": True}},
            ApprovalRequest.objects.get(pk=suspended.json()["id"]),
        ),
    }


def test_a_decision_without_a_revision_is_422_on_every_kind_and_path(every_kind, revision_path):
    alice = revision_path("alice")
    for kind, (decision, extra, request) in every_kind.items():
        before = snapshot(request)
        answer = alice.send(request, decision, revision=None, **extra)
        assert_refused(answer, alice.name, errors.REVISION_REQUIRED, 422, says="revision")
        assert snapshot(request) == before, kind


def test_with_its_revision_each_kind_is_decided(every_kind, revision_path):
    """The refusal above is the missing revision's, not the kind's."""
    alice = revision_path("alice")
    for kind, (decision, extra, request) in every_kind.items():
        answer = alice.send(request, decision, revision=1, **extra)
        assert answer.status in (200, 302) and not answer.code, (kind, answer)
        assert snapshot(request)[0] != State.PENDING_APPROVAL, kind


def test_a_batch_member_without_a_revision_refuses_the_batch_on_the_api(submit, people):
    first, second = submit("send_email"), submit("send_email")
    api = APIClient()
    api.force_login(people["alice"])
    response = api.post(
        "/api/v1/decisions/",
        {"decision": "approve", "requests": [{"id": str(first.pk), "revision": 1}, {"id": str(second.pk)}]},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (422, errors.REVISION_REQUIRED)
    assert [snapshot(r)[0] for r in (first, second)] == [State.PENDING_APPROVAL] * 2


def test_a_batch_member_without_a_revision_refuses_the_batch_on_the_page(submit, people, client):
    first, second = submit("send_email"), submit("send_email")
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:decide-batch"),
        {"decision": "approve", "request": [f"{first.pk}:1", f"{second.pk}"]},
        **JSON_ACCEPT,
    )
    assert (response.status_code, response.json()["code"]) == (422, errors.REVISION_REQUIRED)
    assert [snapshot(r)[0] for r in (first, second)] == [State.PENDING_APPROVAL] * 2


def test_the_service_refuses_a_batch_with_a_member_without_a_revision(submit, people):
    first, second = submit("send_email"), submit("send_email")
    with pytest.raises(DomainError) as refused:
        services.decide_batch(
            [(str(first.pk), 1), (str(second.pk), None)], actor=Person(people["alice"]), verdict="approve"
        )
    assert refused.value.code == errors.REVISION_REQUIRED
    assert [snapshot(r)[0] for r in (first, second)] == [State.PENDING_APPROVAL] * 2


def test_every_card_form_that_decides_sends_its_revision(every_kind, client, people):
    client.force_login(people["alice"])
    page = client.get(reverse("approvals:queue")).content.decode()
    forms = page.split("<form")[1:]
    deciding = [form for form in forms if 'class="decide' in form.split(">", 1)[0]]
    assert len(deciding) >= len(every_kind)
    for form in deciding:
        body = form.split("</form>", 1)[0]
        assert 'name="revision"' in body or 'name="request" value="' in body, body[:300]
