"""A suspension's resume is signed too: the answer the host passes to
`run.resume({step, resumeData})` is bound to the request, its revision and the step,
so an answer altered in transit, or a rejection turned into an answer, is refused by
the client before the workflow moves on."""

from __future__ import annotations

import pytest

from hitl_controlplane.decisions import DecisionRefused, payload_sha256, verify_decision

from .conftest import decide
from .test_answers import AMOUNT_SCHEMA, answer, resume

pytestmark = pytest.mark.django_db


@pytest.fixture
def answered(pending, reviewer_client, api):
    request_id = pending(resume_schema=AMOUNT_SCHEMA)
    answer(reviewer_client("alice"), request_id, {"approved": False, "limit": 150.13})
    return request_id, resume(api, request_id)


def test_an_answer_is_signed_over_exactly_the_answer(answered, server_keys):
    request_id, body = answered
    signed = verify_decision(body, server_keys, request_id=request_id, suspension=True)
    assert (signed["verdict"], signed["payload_sha256"]) == (
        "answered",
        payload_sha256({"approved": False, "limit": 150.13}),
    )


@pytest.mark.parametrize("altered", [{"approved": True, "limit": 150.13}, {"approved": False, "limit": 1e6}, None])
def test_an_answer_altered_in_transit_is_refused(answered, server_keys, altered):
    request_id, body = answered
    body["resume_data"] = altered
    with pytest.raises(DecisionRefused):
        verify_decision(body, server_keys, request_id=request_id, suspension=True)


def test_an_answer_whose_own_keys_look_like_an_action_cannot_pass_as_one(pending, reviewer_client, api, server_keys):
    schema = {"type": "object", "properties": {"action": {"type": "string"}, "params": {"type": "object"}}}
    request_id = pending(resume_schema=schema)
    answer(reviewer_client("alice"), request_id, {"action": "approved", "params": {"amount": 1}})
    body = resume(api, request_id)
    verify_decision(body, server_keys, request_id=request_id, suspension=True)
    with pytest.raises(DecisionRefused, match="kind"):
        verify_decision(body, server_keys, request_id=request_id)  # read as an action's approval


def test_a_rejection_is_signed_with_no_answer(pending, reviewer_client, api, server_keys):
    request_id = pending()
    decide(reviewer_client("alice"), request_id, {"decision": "reject", "feedback": "Call finance first."})
    body = resume(api, request_id)
    assert verify_decision(body, server_keys, request_id=request_id, suspension=True)["verdict"] == "rejected"
    body["resume_data"] = {"approved": True}  # a rejection turned into an answer
    with pytest.raises(DecisionRefused):
        verify_decision(body, server_keys, request_id=request_id, suspension=True)
