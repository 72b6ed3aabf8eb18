"""Passkey step-up over the JSON API, for a batch and for one decision: the passkey signs
a challenge derived from exactly the (request, revision, verdict) triples it confirms,
so its assertion decides that batch once and nothing else: not another batch, not the
same requests with the other verdict, not a single request of the batch alone.

The passkey is a software one (tests/identity/soft_passkey.py) making real assertions;
the browser test with Chromium's virtual authenticator is tests/browser/test_passkeys.py.
"""

from __future__ import annotations

import pytest
from fido2.utils import websafe_encode
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.states import State
from audit.models import AuditEvent

from .soft_passkey import SoftPasskey

CHALLENGES = "/api/v1/step-up/challenges/"
BATCH = "/api/v1/decisions/"


@pytest.fixture
def alice_passkey_api(people, nobody_required):
    """alice with a passkey, signed in on an API client on localhost (a secure context)."""
    passkey = SoftPasskey("localhost")
    passkey.enroll(people["alice"])
    api = APIClient(HTTP_HOST="localhost")
    api.force_login(people["alice"])
    return api, passkey


@pytest.fixture
def payrolls(submit, critical_rule):
    return [submit("run_payroll", params={"amount": n}) for n in (1, 2, 3)]


def items(*requests) -> list[dict]:
    return [{"id": str(request.pk), "revision": 1} for request in requests]


def proof(api: APIClient, passkey: SoftPasskey, decision: str, requests: list[dict], **kwargs) -> dict:
    """A passkey step-up proof for `decision` over `requests` (the challenge asked the API)."""
    asked = api.post(CHALLENGES, {"decision": decision, "requests": requests}, format="json")
    assert asked.status_code == 200, asked.json()
    options = asked.json()
    return {"method": "passkey", "nonce": options["nonce"], "assertion": passkey.sign_options(options, **kwargs)}


def decide_batch(api: APIClient, decision: str, requests: list[dict], step_up: dict | None) -> dict:
    body = {"decision": decision, "requests": requests, **({"step_up": step_up} if step_up else {})}
    response = api.post(BATCH, body, format="json")
    assert response.status_code == 200, response.json()
    return {result["id"]: result.get("outcome") or result["code"] for result in response.json()["results"]}


def states(*requests) -> list[str]:
    return [ApprovalRequest.objects.get(pk=request.pk).state for request in requests]


def test_one_passkey_assertion_approves_the_whole_batch_it_was_made_for(alice_passkey_api, payrolls):
    api, passkey = alice_passkey_api
    first, second, _ = payrolls

    outcomes = decide_batch(api, "approve", items(first, second), proof(api, passkey, "approve", items(first, second)))

    assert set(outcomes.values()) == {"approved"}
    assert states(first, second) == [State.APPROVED, State.APPROVED]
    recorded = AuditEvent.objects.filter(verb="decision.recorded", request_id__in=[first.pk, second.pk])
    assert {(event.metadata["step_up"], event.metadata["step_up_credential"]) for event in recorded} == {
        ("passkey", websafe_encode(passkey.credential_id))
    }


def test_a_proof_for_one_batch_is_refused_for_a_different_batch(alice_passkey_api, payrolls):
    api, passkey = alice_passkey_api
    first, second, third = payrolls
    made_for_first_two = proof(api, passkey, "approve", items(first, second))

    outcomes = decide_batch(api, "approve", items(first, third), made_for_first_two)

    assert set(outcomes.values()) == {"step_up_failed"}  # signed over another digest
    assert states(first, third) == [State.PENDING_APPROVAL, State.PENDING_APPROVAL]
    # The nonce was spent on the refusal: the proof no longer decides its own batch either.
    again = decide_batch(api, "approve", items(first, second), made_for_first_two)
    assert "approved" not in again.values()
    assert states(first, second) == [State.PENDING_APPROVAL, State.PENDING_APPROVAL]


def test_a_proof_for_a_batch_is_refused_for_part_of_it(alice_passkey_api, payrolls):
    api, passkey = alice_passkey_api
    first, second, _ = payrolls
    outcomes = decide_batch(api, "approve", items(first), proof(api, passkey, "approve", items(first, second)))
    assert "approved" not in outcomes.values()
    assert states(first) == [State.PENDING_APPROVAL]


def test_a_proof_to_approve_as_it_stands_does_not_approve_with_edits(alice_passkey_api, payrolls, people):
    """The verdict is part of what the passkey signs (rejecting needs no step-up at all)."""
    api, passkey = alice_passkey_api
    first = payrolls[0]
    for_plain_approval = proof(api, passkey, "approve", items(first))
    refused = api.post(
        f"/api/v1/requests/{first.pk}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"amount": 5}, "step_up": for_plain_approval},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["code"] == "step_up_failed", refused.json()
    assert states(first) == [State.PENDING_APPROVAL]


def test_a_batch_proof_is_valid_once(alice_passkey_api, payrolls):
    api, passkey = alice_passkey_api
    first, second, third = payrolls
    step_up = proof(api, passkey, "approve", items(first, second))
    assert set(decide_batch(api, "approve", items(first, second), step_up).values()) == {"approved"}
    assert "approved" not in decide_batch(api, "approve", items(third), step_up).values()
    assert states(third) == [State.PENDING_APPROVAL]


def test_without_user_verification_the_assertion_decides_nothing(alice_passkey_api, payrolls):
    api, passkey = alice_passkey_api
    first, second, _ = payrolls
    unverified = proof(api, passkey, "approve", items(first, second), verified=False)
    assert "approved" not in decide_batch(api, "approve", items(first, second), unverified).values()


def test_a_single_decisions_proof_cannot_decide_another_request(alice_passkey_api, payrolls):
    api, passkey = alice_passkey_api
    first, second, _ = payrolls
    for_first = proof(api, passkey, "approve", items(first))
    refused = api.post(
        f"/api/v1/requests/{second.pk}/decisions/",
        {"decision": "approve", "revision": 1, "step_up": for_first},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["code"] == "step_up_failed"
    assert states(second) == [State.PENDING_APPROVAL]


def test_a_batch_without_a_proof_is_refused_with_the_method_to_use(alice_passkey_api, payrolls):
    api, _ = alice_passkey_api
    first, second, _ = payrolls
    assert set(decide_batch(api, "approve", items(first, second), None).values()) == {"step_up_required"}
