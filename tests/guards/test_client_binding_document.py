"""Issue 22 (5): the v2 decision document, as both sides compute it. It names the agent, kind,
action type, the digest of the submitted params, the idempotency key and the tool-call id; the
server signs the digest of what the client submitted, the client normalizes action types as the
server does, and the test vectors (`VECTOR*`, docs/agents.md) pin the bytes and the signature.
"""

from __future__ import annotations

import hashlib
from datetime import UTC

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agents.resume import is_decided, resume_payload
from approvals import services
from approvals.models import ApprovalRequest
from approvals.policy.rules.names import ActionTypeError, parse_action_type
from hitl_controlplane.canonical import canonical_bytes, value_bytes
from hitl_controlplane.client import DecisionRefused
from hitl_controlplane.decisions import (
    CONTEXT,
    SubmittedCall,
    decision_document,
    normalize_action_type,
    payload_sha256,
    sign_decision,
    signed_message,
    trusted_keys,
    verify_decision,
)
from hitl_controlplane.ed25519 import SigningKey

from .client_binding_story import SUBMIT

pytestmark = pytest.mark.django_db


# Text as the API accepts it (NUL and lone surrogates are refused at the edge, before any digest).
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
json_scalars = (
    st.none()
    | st.booleans()
    | texts
    | st.integers(min_value=-(10**40), max_value=10**40)  # big ints stay exact
    | st.decimals(allow_nan=False, allow_infinity=False, places=4).map(str)  # decimals as strings
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=10
)


@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(texts, json_values, max_size=4))
def test_the_server_signs_the_digest_of_the_params_the_client_submitted(token, alice_person, params):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    key = "hyp-" + hashlib.sha256(value_bytes(params)).hexdigest()[:40]
    response = api.post(
        SUBMIT, {"action_type": "transfer_funds", "params": params}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert response.status_code in (200, 201), response.content
    request = ApprovalRequest.objects.select_related("agent").get(pk=response.json()["id"])
    made = SubmittedCall.action("transfer_funds", params, idempotency_key=key)
    assert request.submitted_sha256 == made.submitted_sha256
    if not is_decided(request):
        services.reject(request.pk, actor=alice_person, revision=1)
        request.refresh_from_db()
    signed = resume_payload(request)["decision_signature"]["signed"]
    assert signed["submitted_sha256"] == made.submitted_sha256


def test_the_digest_of_a_request_stored_without_one_is_read_from_its_first_revision(decided):
    request = ApprovalRequest.objects.select_related("agent").get(pk=decided())
    stored = request.submitted_sha256
    ApprovalRequest.objects.filter(pk=request.pk).update(submitted_sha256="")
    request.refresh_from_db()
    assert resume_payload(request)["decision_signature"]["signed"]["submitted_sha256"] == stored


@hypothesis_settings(max_examples=200, deadline=None)
@given(raw=st.text(alphabet=st.sampled_from("aZ9_-. /\u200b\u0301\uff21\u2160\u00df\u0435\t"), max_size=12))
def test_the_client_normalizes_an_action_type_as_the_server_does(raw):
    try:
        expected = parse_action_type(raw).normalized
    except ActionTypeError:
        return  # refused at submission: no decision ever names it
    assert normalize_action_type(raw) == expected


VECTOR_KEY = SigningKey.from_secret("decision document v2 test vector")
VECTOR_TOOL_RESULT = "Approved."
VECTOR = decision_document(
    kind="action",
    agent={"id": 7, "name": "pay-bot"},
    request_id="7b1f3c52-9d1e-4d8c-9c39-2f0a4b6c1e01",
    revision=2,
    action_type="transfer_funds",
    idempotency_key="cpc-6f1d",
    tool_call_id="call_7",
    submitted_sha256=payload_sha256({"amount": 900, "to": "acme", "rate": 1.5}),
    resume_data={"action": "approved", "params": {"amount": 500, "to": "acme", "rate": 1.5}},
    tool_result=VECTOR_TOOL_RESULT,
    execute_by="2026-12-01T10:15:00.000000Z",
)
VECTOR_BYTES = (
    b"hitl-controlplane decision v2\x00"
    b'{"action_type":"transfer_funds","agent":{"id":7,"name":"pay-bot"},"execute_by":"2026-12-01T10:15:00.000000Z",'
    b'"idempotency_key":"cpc-6f1d","kind":"action",'
    b'"payload_sha256":"ba109eea3ec5463d98cdfa4341fc92c17fa0f2b59ceba5de215a278f462144f3",'
    b'"request_id":"7b1f3c52-9d1e-4d8c-9c39-2f0a4b6c1e01","revision":2,'
    b'"submitted_sha256":"96b610804f01922ea2775f03d2a5ce49c9b21347ad5cf934834671da7e809de3","tool_call_id":"call_7",'
    b'"tool_result_sha256":"7e0019a3769b3e37d8a83d04a70720b100041b63e8000b03eafc85071a7a67bf",'
    b'"type":"hitl-controlplane/decision","v":2,"verdict":"approved"}'
)
APPROVED_PARAMS_BYTES = b'{"amount":500,"rate":1.5,"to":"acme"}'
SUBMITTED_PARAMS_BYTES = b'{"amount":900,"rate":1.5,"to":"acme"}'
VECTOR_PUBLIC_KEY = "ed25519:DPNRohExzI2pS-zya59gdmMvFSTJWfOy_OXcXr2eKc4"  # key id 9cb54df5a1b336b1
VECTOR_SIGNATURE = "wJS09uLodjlj2Ndpen4shN45Z6WE8Q_8u0ON5HR2jiH-0Pux_g2e9MRdF2O0YLtVP7lRHCMqjCvYtC15viTLBw"


def test_vector_the_params_digests_are_sha256_of_rfc8785_bytes():
    assert value_bytes({"to": "acme", "rate": 1.5, "amount": 500}) == APPROVED_PARAMS_BYTES
    assert VECTOR["payload_sha256"] == hashlib.sha256(APPROVED_PARAMS_BYTES).hexdigest()
    assert VECTOR["submitted_sha256"] == hashlib.sha256(SUBMITTED_PARAMS_BYTES).hexdigest()


def test_vector_the_signed_bytes_are_the_context_then_the_canonical_document():
    assert signed_message(VECTOR) == VECTOR_BYTES
    assert hashlib.sha256(VECTOR_TOOL_RESULT.encode()).hexdigest() == VECTOR["tool_result_sha256"]
    assert CONTEXT == b"hitl-controlplane decision v2\x00"


def test_vector_the_signature_is_pinned():
    block = sign_decision(VECTOR_KEY, VECTOR)
    assert (block["key_id"], VECTOR_KEY.public_text) == ("9cb54df5a1b336b1", VECTOR_PUBLIC_KEY)
    assert block["signature"] == VECTOR_SIGNATURE
    payload = {
        "request_id": VECTOR["request_id"],
        "decided": True,
        "state": "approved",
        "tool_result": VECTOR_TOOL_RESULT,
        "resume_data": {"action": "approved", "params": {"amount": 500, "to": "acme", "rate": 1.5}},
        "decision_signature": block,
    }
    call = SubmittedCall.action(
        "transfer_funds",
        {"amount": 900, "to": "acme", "rate": 1.5},
        idempotency_key="cpc-6f1d",
        tool_call_id="call_7",
        agent="pay-bot",
    )
    from datetime import datetime

    assert (
        verify_decision(
            payload, trusted_keys([VECTOR_PUBLIC_KEY]), call=call, now=datetime(2026, 12, 1, 10, tzinfo=UTC)
        )
        == VECTOR
    )


def test_a_signature_under_another_documents_context_does_not_verify():
    """The execution grant (a later document type) signs under its own context: a grant's
    signature over the same fields can never pass as a decision's, nor a v1 decision's."""
    block = sign_decision(VECTOR_KEY, VECTOR)
    payload = {
        "request_id": VECTOR["request_id"],
        "tool_result": VECTOR_TOOL_RESULT,
        "resume_data": {"action": "approved", "params": {"amount": 500, "to": "acme", "rate": 1.5}},
    }
    for context in (b"hitl-controlplane grant v1\x00", b"hitl-controlplane decision v1\x00", b""):
        forged = {**block, "signature": VECTOR_KEY.sign_bytes(context + canonical_bytes(VECTOR))}
        with pytest.raises(DecisionRefused, match="does not match"):
            verify_decision({**payload, "decision_signature": forged}, trusted_keys([VECTOR_PUBLIC_KEY]))


def test_a_v1_document_signed_under_the_v2_context_is_refused():
    v1 = {
        key: VECTOR[key]
        for key in ("request_id", "revision", "action_type", "tool_call_id", "verdict", "payload_sha256", "execute_by")
    } | {"v": 1}
    block = {
        "algorithm": "ed25519",
        "key_id": VECTOR_KEY.key_id,
        "signed": v1,
        "signature": VECTOR_KEY.sign_bytes(CONTEXT + canonical_bytes(v1)),
    }
    payload = {
        "request_id": VECTOR["request_id"],
        "decision_signature": block,
        "tool_result": VECTOR_TOOL_RESULT,
        "resume_data": {"action": "approved", "params": {"amount": 500, "to": "acme", "rate": 1.5}},
    }
    with pytest.raises(DecisionRefused, match="not a hitl-controlplane/decision v2"):
        verify_decision(payload, trusted_keys([VECTOR_PUBLIC_KEY]))
