"""The grant v1 document (hitl_controlplane.grants), offline: what verify_grant accepts and refuses.

No server: a grant signed with a test key, checked against the decision it must match.
Every field of the signed document is bound (tampering with any one is refused), and
neither a decision nor a grant can stand in for the other.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hitl_controlplane.decisions import DecisionRefused, decision_document, sign_decision, trusted_keys, verify_decision
from hitl_controlplane.ed25519 import SigningKey
from hitl_controlplane.grants import CONTEXT, grant_document, new_nonce, sign_grant, signed_message, verify_grant

KEY = SigningKey.from_secret("grant tests")
KEYS = trusted_keys([KEY.public_text])
REQUEST_ID = "6f1c8c1e-8f7e-4d61-9a53-2a4c2f7e0b11"
PARAMS = {"amount": 900, "to": "acme", "memo": "Rechnung №42"}
AGENT = {"id": 7, "name": "payments-bot"}
NONCE = "client-nonce-" + "x" * 30


def _decision() -> dict:
    return decision_document(
        kind="action",
        agent=AGENT,
        request_id=REQUEST_ID,
        revision=2,
        action_type="transfer_funds",
        idempotency_key="k-1",
        tool_call_id="call_1",
        submitted_sha256="0" * 64,
        resume_data={"action": "approved", "params": PARAMS},
        tool_result="Approved.",
        execute_by=None,
    )


def _grant(**overrides) -> dict:
    fields = dict(
        request_id=REQUEST_ID,
        revision=2,
        agent=AGENT,
        action_type="transfer_funds",
        params=PARAMS,
        idempotency_key=f"cp-{REQUEST_ID}-r2",
        nonce=NONCE,
        attempt=1,
        lease_until="2026-12-04T03:30:00.000000Z",
    )
    fields.update(overrides)
    return grant_document(**fields)


def _answer(document: dict, params=PARAMS) -> dict:
    return {
        "request_id": REQUEST_ID,
        "token": "t",
        "params": copy.deepcopy(params),
        "grant_signature": sign_grant(KEY, document),
    }


def test_a_genuine_grant_for_this_decision_and_nonce_verifies():
    signed = verify_grant(_answer(_grant()), KEYS, decision=_decision(), nonce=NONCE)
    assert signed["type"] == "hitl-controlplane/grant" and signed["nonce"] == NONCE


def test_the_nonce_is_fresh_and_url_safe():
    nonces = {new_nonce() for _ in range(50)}
    assert len(nonces) == 50 and all(len(n) == 43 and n.replace("-", "").replace("_", "").isalnum() for n in nonces)


@pytest.mark.parametrize(
    "overrides, refused_for",
    [
        (dict(request_id="00000000-0000-4000-8000-000000000000"), "request_id"),
        (dict(revision=1), "revision"),
        (dict(params={**PARAMS, "amount": 1_000_000}), "params_sha256"),
        (dict(agent={"id": 8, "name": "other-bot"}), "agent"),
        (dict(action_type="delete_account"), "action_type"),
        (dict(nonce="another-process-nonce-" + "y" * 20), "nonce"),
    ],
)
def test_a_genuine_grant_for_another_call_or_claim_is_refused(overrides, refused_for):
    """Signed by the server, but not for this decision or this claim: replayed, or swapped in."""
    with pytest.raises(DecisionRefused, match=refused_for):
        verify_grant(_answer(_grant(**overrides)), KEYS, decision=_decision(), nonce=NONCE)


def test_params_altered_in_the_answer_are_refused():
    with pytest.raises(DecisionRefused, match="not the granted ones"):
        verify_grant(_answer(_grant(), params={**PARAMS, "to": "mallory"}), KEYS, decision=_decision(), nonce=NONCE)


def test_a_decision_presented_as_a_grant_is_refused():
    decision = _decision()
    answer = {"params": PARAMS, "token": "t", "grant_signature": sign_decision(KEY, decision)}
    with pytest.raises(DecisionRefused, match="does not match"):
        verify_grant(answer, KEYS, decision=decision, nonce=NONCE)


def test_a_grant_presented_as_a_decision_is_refused():
    payload = {
        "request_id": REQUEST_ID,
        "resume_data": {"action": "approved", "params": PARAMS},
        "tool_result": "Approved.",
        "decision_signature": sign_grant(KEY, _grant()),
    }
    with pytest.raises(DecisionRefused, match="does not match"):
        verify_decision(payload, KEYS, request_id=REQUEST_ID)


def test_a_grant_needs_an_approval_and_a_trusted_key():
    with pytest.raises(DecisionRefused, match="not an approval"):
        verify_grant(_answer(_grant()), KEYS, decision={**_decision(), "verdict": "rejected"}, nonce=NONCE)
    stranger = trusted_keys([SigningKey.from_secret("someone else").public_text])
    with pytest.raises(DecisionRefused, match="does not trust"):
        verify_grant(_answer(_grant()), stranger, decision=_decision(), nonce=NONCE)
    with pytest.raises(DecisionRefused, match="no grant_signature"):
        verify_grant({"params": PARAMS}, KEYS, decision=_decision(), nonce=NONCE)


def test_the_signed_message_has_its_own_context():
    assert signed_message(_grant()).startswith(CONTEXT) and CONTEXT == b"hitl-controlplane grant v1\x00"


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20))


@given(field=st.sampled_from(sorted(_grant())), value=JSON_SCALARS)
def test_tampering_with_any_signed_field_is_refused(field, value):
    """Whatever a man in the middle writes into any field of the signed grant, the signature breaks."""
    answer = _answer(_grant())
    signed = answer["grant_signature"]["signed"]
    if signed[field] == value:
        return
    signed[field] = value
    with pytest.raises(DecisionRefused):
        verify_grant(answer, KEYS, decision=_decision(), nonce=NONCE)
