"""The shared test vectors are what the Python client computes today.

clients/testvectors/vectors.json is committed and read by the TypeScript client's tests
(clients/typescript/test/vectors.test.mjs); if canonical.py, decisions.py or the grant
format change, this fails until the file is regenerated, so the clients cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from hitl_controlplane.decisions import DecisionRefused, SubmittedCall, trusted_keys, verify_decision

VECTORS = Path(__file__).resolve().parents[2] / "clients" / "testvectors"


def _generator():
    spec = importlib.util.spec_from_file_location("testvectors_generate", VECTORS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_vectors_are_what_the_generator_makes_now():
    committed = (VECTORS / "vectors.json").read_text(encoding="ascii")
    assert committed == _generator().render(), (
        "clients/testvectors/vectors.json is stale: run `python clients/testvectors/generate.py --write`"
    )


def test_every_vector_decision_verifies_with_the_python_client():
    from datetime import datetime

    vectors = json.loads((VECTORS / "vectors.json").read_text(encoding="ascii"))
    keys = trusted_keys([vectors["key"]["public"]])
    now = datetime.fromisoformat(vectors["now"].replace("Z", "+00:00"))
    for vector in vectors["decisions"]:
        call = vector["call"]
        ids = {"idempotency_key": call["idempotency_key"], "tool_call_id": call["tool_call_id"], "agent": call["agent"]}
        if call["kind"] == "action":
            submitted = SubmittedCall.action(call["action_type"], call["params"], **ids)
        elif call["kind"] == "plan":
            submitted = SubmittedCall.plan(call["path"], call["plan"], **ids)
        else:
            submitted = SubmittedCall.suspension(call["action_type"], call["suspend_payload"], **ids)
        signed = verify_decision(
            vector["payload"], keys, request_id=vector["payload"]["request_id"], call=submitted, now=now
        )
        assert signed == vector["payload"]["decision_signature"]["signed"]


def test_every_vector_grant_verifies_with_the_python_client():
    """Runs once the Python grant module (grant spec v1) is on this branch; skipped, with its reason, before."""
    grants = pytest.importorskip(
        "hitl_controlplane.grants", reason="hitl_controlplane.grants (grant v1) not merged yet"
    )
    vectors = json.loads((VECTORS / "vectors.json").read_text(encoding="ascii"))
    keys = trusted_keys([vectors["key"]["public"]])
    decision = vectors["decisions"][0]["payload"]["decision_signature"]["signed"]
    for vector in vectors["grants"]:
        signed = grants.verify_grant(vector["answer"], keys, decision=decision, nonce=vector["nonce"])
        assert signed == vector["answer"]["grant_signature"]["signed"]
        assert grants.signed_message(signed).hex() == vector["message_hex"]
    for block in vectors["crossed"].values():
        with pytest.raises(DecisionRefused):
            grants.verify_grant(
                {**vectors["grants"][0]["answer"], "grant_signature": block},
                keys,
                decision=decision,
                nonce=vectors["grants"][0]["nonce"],
            )
