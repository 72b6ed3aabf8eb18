"""The server signs every decided resume (`decision_signature`), wherever it is read:
the resume long-poll and the webhook callback (the agent socket sends the same
`resume_payload`). An agent verifies it with the key `manage.py audit_public_key` prints."""

from __future__ import annotations

import hashlib
import json

import pytest
from freezegun import freeze_time

from agents.callbacks import deliver_due_callbacks
from approvals import services
from approvals.models import ApprovalRequest
from hitl_controlplane.canonical import format_timestamp
from hitl_controlplane.decisions import DecisionRefused, payload_sha256, verify_decision
from tests.api.conftest import EMAIL
from tests.api.test_callbacks import Receiver
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db


def _resume(api, request_id: str) -> dict:
    response = api.get(f"/api/v1/requests/{request_id}/resume/")
    assert response.status_code == 200, response.content
    return response.json()


def test_an_approval_with_edits_is_signed_for_the_edited_params_and_the_new_revision(
    api, people, two_person_rule, server_keys
):
    request_id = api.post(
        "/api/v1/actions/",
        {
            "action_type": "Transfer_Funds",
            "tool_call_id": "call_7",
            "params": {"amount": 900, "to": "acme", "rate": 1.0, "fee": 0.15},
        },
        format="json",
    ).json()["id"]
    services.approve_with_edits(
        request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]), edits={"amount": 500}
    )
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["bob"]))
    body = _resume(api, request_id)
    signed = verify_decision(
        body, server_keys, request_id=request_id, tool_call_id="call_7", action_type="transfer_funds"
    )
    request = ApprovalRequest.objects.get(pk=request_id)
    assert signed == {
        "type": "hitl-controlplane/decision",
        "v": 2,
        "kind": "action",
        "agent": {"id": request.agent_id, "name": "mail-bot"},
        "request_id": request_id,
        "revision": 2,
        "action_type": "transfer_funds",
        "idempotency_key": None,
        "tool_call_id": "call_7",
        "submitted_sha256": payload_sha256({"amount": 900, "to": "acme", "rate": 1.0, "fee": 0.15}),
        "verdict": "approved",
        "payload_sha256": payload_sha256({"amount": 500, "to": "acme", "rate": 1.0, "fee": 0.15}),
        "tool_result_sha256": hashlib.sha256(body["tool_result"].encode()).hexdigest(),
        "execute_by": format_timestamp(request.execute_by),
    }
    assert body["decision_signature"]["key_id"] in server_keys


def test_the_original_params_do_not_match_the_signed_edit(api, people, two_person_rule, server_keys):
    request_id = api.post(
        "/api/v1/actions/", {"action_type": "transfer_funds", "params": {"amount": 900}}, format="json"
    ).json()["id"]
    services.approve_with_edits(
        request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]), edits={"amount": 500}
    )
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["bob"]))
    body = _resume(api, request_id)
    body["resume_data"]["params"] = {"amount": 900}  # what the agent asked for, not what people approved
    with pytest.raises(DecisionRefused, match="payload_sha256"):
        verify_decision(body, server_keys, request_id=request_id)


def test_rejections_and_expiries_are_signed_and_undecided_requests_are_not(api, people, server_keys):
    pending = api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]
    assert "decision_signature" not in _resume(api, pending)
    rejected = api.post("/api/v1/actions/", EMAIL, format="json").json()["id"]
    services.reject(
        rejected,
        revision=current_revision(rejected),
        actor=services.Person(people["alice"]),
        feedback="Wrong recipient",
    )
    assert verify_decision(_resume(api, rejected), server_keys, request_id=rejected)["verdict"] == "rejected"
    with freeze_time("2099-01-01"):
        expired = _resume(api, pending)
    assert expired["state"] == "expired"
    assert verify_decision(expired, server_keys, request_id=pending)["payload_sha256"] is None


def test_a_plan_approval_is_signed_over_the_plan_text(api, people, server_keys):
    request_id = api.post("/api/v1/plans/", {"path": "plans/a.md", "plan": "# A\n\n1. Do it.\n"}, format="json").json()[
        "id"
    ]
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    body = _resume(api, request_id)
    verify_decision(body, server_keys, request_id=request_id)
    body["resume_data"]["plan"] = "# A\n\n1. Do it.\n2. And drop the database.\n"
    with pytest.raises(DecisionRefused):
        verify_decision(body, server_keys, request_id=request_id)


@pytest.mark.django_db(transaction=True)
def test_the_webhook_callback_carries_the_same_signed_decision(api, people, server_keys):
    receiver = Receiver([])
    request_id = api.post(
        "/api/v1/actions/", {**EMAIL, "tool_call_id": "call_3", "callback_url": receiver.url}, format="json"
    ).json()["id"]
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    assert deliver_due_callbacks() >= 1
    payload = json.loads(receiver.received[-1][1])
    signed = verify_decision(
        payload, server_keys, request_id=request_id, tool_call_id="call_3", action_type="send_email"
    )
    assert signed["payload_sha256"] == payload_sha256(EMAIL["params"])
    receiver.close()


def test_a_reply_in_place_of_the_tool_is_signed_over_its_words(api, people, server_keys):
    request_id = api.post(
        "/api/v1/actions/", {**EMAIL, "allowed_decisions": ["approve", "reject", "respond"]}, format="json"
    ).json()["id"]
    services.respond_instead(
        request_id,
        "Use the shared outbox instead.",
        revision=current_revision(request_id),
        actor=services.Person(people["alice"]),
    )
    body = _resume(api, request_id)
    signed = verify_decision(body, server_keys, request_id=request_id)
    assert signed["payload_sha256"] == payload_sha256({"message": "Use the shared outbox instead."})
    body["resume_data"]["message"] = "Send it to everyone."  # a reply altered in transit
    with pytest.raises(DecisionRefused, match="payload_sha256"):
        verify_decision(body, server_keys, request_id=request_id)
