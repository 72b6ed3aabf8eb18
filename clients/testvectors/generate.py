"""Shared test vectors: what the Python client computes, for every other client to reproduce.

    python clients/testvectors/generate.py          # print
    python clients/testvectors/generate.py --write  # rewrite vectors.json beside this file

The TypeScript client's tests (clients/typescript/test) verify every document here and
refuse tampered copies; tests/client/test_shared_vectors.py checks that vectors.json is
exactly what this script generates now, so the Python and TypeScript sides cannot drift.
Everything is deterministic: a fixed signing key (Ed25519 signatures are deterministic),
fixed ids and a fixed `now` for the execution deadline checks.

The grant side follows the integrator's grant spec (v1): message
`b"hitl-controlplane grant v1\\x00"` + canonical_bytes(document).
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))  # run from a checkout, without installing the client

from hitl_controlplane.canonical import canonical_bytes, value_bytes, value_sha256  # noqa: E402
from hitl_controlplane.decisions import (  # noqa: E402
    SubmittedCall,
    decision_document,
    normalize_action_type,
    sign_decision,
    signed_message,
)
from hitl_controlplane.ed25519 import SigningKey  # noqa: E402

VECTORS = HERE / "vectors.json"
KEY = SigningKey.from_secret("hitl-controlplane shared test vectors v1")
OTHER_KEY = SigningKey.from_secret("hitl-controlplane shared test vectors v1: not the pinned key")
GRANT_CONTEXT = b"hitl-controlplane grant v1\x00"
NOW = "2026-12-04T00:00:00.000000Z"
EXECUTE_BY = "2026-12-04T01:00:00.000000Z"
AGENT = {"id": 7, "name": "pay-bot"}

# JSON values whose bytes differ between naive serializers: key order by code point (the
# chain's form) versus UTF-16 code units (RFC 8785) past U+FFFF, escapes, numbers.
TRICKY_VALUES: list[Any] = [
    {},
    [],
    {"b": 1, "a": [True, False, None], "": "empty key"},
    {"\ue000": "private use", "\U0001f600": "astral", "z": "ascii", "é": "e acute"},
    {'quote"back\\slash': "tab\tnewline\ncr\rnul\u0000us\u001fdel\u007f", "seps": "\u2028\u2029"},
    {"composed": "\u00e9", "decomposed": "e\u0301", "emoji": "\U0001f469\u200d\U0001f4bb", "cjk": "確認"},
    # Integers only up to 2^53: past it JSON.parse has already rounded them, so a JavaScript client
    # refuses (the digest differs) what Python holds exactly.
    {"ints": [0, -1, 9007199254740991, -9007199254740991]},
    {"nested": {"deeper": {"deepest": ["x", {"k": "v"}]}}},
]
# Numbers RFC 8785 prints as ECMAScript does; the chain's canonical form refuses the floats.
TRICKY_NUMBERS: list[Any] = [
    0.1,
    -1.5,
    1e21,
    1e-7,
    123456789012345680000.0,
    5e-324,
    1.7976931348623157e308,
    -0.0,
    1.0,
    100,
    0.000001,
    333333333.33333329,
]
LONE_SURROGATES = ["\ud800", {"\udfff": 1}, ["ok", "\udbff"]]

ACTION_TYPES = [
    "send_email",
    "  Delete_Database/ ",
    "github.create_issue",
    "\u200bSend\u200b",
    "\ufb01le.ReAD",
    "\uff26\uff55\uff4c\uff4c\uff37\uff49\uff44\uff54\uff48",
    "Stra\u00dfe",
    "STRA\u1e9eE",
    "\u0131nd\u0130a",
    "\u01f0ob",
    "\uab70\u13f8\u13a0",
    "\u03a3\u0391\u03a3",
    "\u212a\u2126",
    "\u0149",
    "\u1fbc",
    "\u00b5",
    "\u2460\u216b",
    "\u0301x\u0301",
    "\u017ftop",
    "\u01c5",
    "-_.",
]


def _grant_document(decision: dict[str, Any], *, nonce: str, attempt: int, lease_until: str) -> dict[str, Any]:
    return {
        "type": "hitl-controlplane/grant",
        "v": 1,
        "request_id": decision["request_id"],
        "revision": decision["revision"],
        "agent": dict(decision["agent"]),
        "action_type": decision["action_type"],
        "params_sha256": decision["payload_sha256"],
        "idempotency_key": f"cp-{decision['request_id']}-r{decision['revision']}",
        "nonce": nonce,
        "attempt": attempt,
        "lease_until": lease_until,
    }


def _sign_grant(key: SigningKey, document: dict[str, Any]) -> dict[str, Any]:
    return {
        "algorithm": "ed25519",
        "key_id": key.key_id,
        "signed": document,
        "signature": key.sign_bytes(GRANT_CONTEXT + canonical_bytes(document)),
    }


def _decided(
    *,
    kind: str,
    request_id: str,
    call: dict[str, Any],
    submitted: SubmittedCall,
    state: str,
    resume_data: Any,
    tool_result: str,
    execute_by: str | None = None,
) -> dict[str, Any]:
    document = decision_document(
        kind=kind,
        agent=AGENT,
        request_id=request_id,
        revision=2,
        action_type=submitted.action_type,
        idempotency_key=submitted.idempotency_key,
        tool_call_id=submitted.tool_call_id,
        submitted_sha256=submitted.submitted_sha256,
        resume_data=resume_data,
        tool_result=tool_result,
        execute_by=execute_by,
    )
    payload = {
        "request_id": request_id,
        "state": state,
        "decided": True,
        "resume_data": resume_data,
        "tool_result": tool_result,
        "decision_signature": sign_decision(KEY, document),
    }
    return {
        "name": f"{kind} {state}",
        "call": call,
        "submitted_sha256": submitted.submitted_sha256,
        "payload": payload,
        "message_hex": signed_message(document).hex(),
    }


def _decisions() -> list[dict[str, Any]]:
    params = {"amount": 90, "to": "acme", "memo": "Q3 \u00e9\u00e9 \U0001f4b8", "rate": 0.1}
    approved = {"amount": 50, "to": "acme", "memo": "Q3 \u00e9\u00e9 \U0001f4b8", "rate": 0.1}
    action = {"kind": "action", "action_type": " Transfer_Funds ", "params": params}
    ids = {"idempotency_key": "cpc-vector-1", "tool_call_id": "call_7", "agent": "pay-bot"}
    action_call = SubmittedCall.action(action["action_type"], params, **ids)
    plan_text = "# Dark mode\n\n1. Add a toggle.\n"
    plan = {"kind": "plan", "path": " .plans/dark-mode.md ", "plan": plan_text}
    plan_call = SubmittedCall.plan(plan["path"], plan_text, **{**ids, "idempotency_key": "cpc-vector-2"})
    suspend_payload = {"amount": 150.13, "reason": "Amount exceeds automatic approval limit"}
    suspension = {"kind": "suspension", "action_type": "approval-flow.approval", "suspend_payload": suspend_payload}
    suspension_ids = {**ids, "idempotency_key": "run-1:approval", "tool_call_id": ""}
    suspension_call = SubmittedCall.suspension(suspension["action_type"], suspend_payload, **suspension_ids)
    request = "6f1d2c3b-4a59-4e6f-8a7b-9c0d1e2f3a4b"
    return [
        _decided(
            kind="action",
            request_id=request,
            call={**action, **ids},
            submitted=action_call,
            state="approved",
            resume_data={"action": "approved", "params": approved},
            tool_result="Approved with edits. Proceed with exactly these params.",
            execute_by=EXECUTE_BY,
        ),
        _decided(
            kind="action",
            request_id="7a2e3d4c-5b6a-4f70-9b8c-0d1e2f3a4b5c",
            call={**action, **ids},
            submitted=action_call,
            state="rejected",
            resume_data={"action": "rejected", "feedback": "Not this quarter."},
            tool_result="Rejected: Not this quarter. Do not retry the same call unchanged.",
        ),
        _decided(
            kind="action",
            request_id="8b3f4e5d-6c7b-4081-8c9d-1e2f3a4b5c6d",
            call={**action, **ids},
            submitted=action_call,
            state="rejected",
            resume_data={"action": "responded", "message": "Paid already \u2014 see the ledger."},
            tool_result="The tool was not run: a reviewer answered in its place. Their reply:\n\nPaid already.",
        ),
        _decided(
            kind="plan",
            request_id="9c4a5f6e-7d8c-4192-9dae-2f3a4b5c6d7e",
            call={**plan, **ids, "idempotency_key": "cpc-vector-2"},
            submitted=plan_call,
            state="approved",
            resume_data={"action": "approved", "path": ".plans/dark-mode.md", "title": "Dark mode", "plan": plan_text},
            tool_result="Plan approved. Proceed with implementation following the approved plan.",
        ),
        _decided(
            kind="suspension",
            request_id="ad5b6a7f-8e9d-42a3-8ebf-3a4b5c6d7e8f",
            call={**suspension, **suspension_ids},
            submitted=suspension_call,
            state="approved",
            resume_data={"approved": True, "action": "a field of the host's own schema"},
            tool_result="Answered.",
        ),
        _decided(
            kind="suspension",
            request_id="be6c7b8a-9f0e-43b4-9fc0-4b5c6d7e8f90",
            call={**suspension, **suspension_ids},
            submitted=suspension_call,
            state="rejected",
            resume_data=None,
            tool_result="Rejected.",
        ),
    ]


def _grants(approved: dict[str, Any]) -> list[dict[str, Any]]:
    decision = approved["payload"]["decision_signature"]["signed"]
    params = approved["payload"]["resume_data"]["params"]
    grants = []
    for attempt, nonce in (
        (1, "bm9uY2UtMS1mb3ItdGhlLXZlY3Rvci1vbmx5LXNpeA"),
        (2, "A_second-claim_nonce_0123456789abcdefghijk"),
    ):
        document = _grant_document(decision, nonce=nonce, attempt=attempt, lease_until="2026-12-04T00:05:00.123456Z")
        grants.append(
            {
                "name": f"grant attempt {attempt}",
                "decision": approved["name"],
                "nonce": nonce,
                "answer": {
                    "request_id": decision["request_id"],
                    "token": f"grant-token-{attempt}",
                    "idempotency_key": document["idempotency_key"],
                    "params": params,
                    "lease_until": document["lease_until"],
                    "attempt": attempt,
                    "revision": decision["revision"],
                    "grant_signature": _sign_grant(KEY, document),
                },
                "message_hex": (GRANT_CONTEXT + canonical_bytes(document)).hex(),
            }
        )
    return grants


def _crossed(approved: dict[str, Any]) -> dict[str, Any]:
    """Signatures a client must refuse where a grant is expected (each as a `grant_signature`)."""
    decision = approved["payload"]["decision_signature"]["signed"]
    grant = _grant_document(decision, nonce="bm9uY2UtMS1mb3ItdGhlLXZlY3Rvci1vbmx5LXNpeA", attempt=1, lease_until=NOW)
    return {
        # the right grant, signed by a key the client does not pin
        "grant_by_other_key": _sign_grant(OTHER_KEY, grant),
        # the grant document signed under the decision's context: not a grant signature
        "grant_with_decision_context": sign_decision(KEY, grant),
        # the decision document signed under the grant's context: a valid signature, the wrong type
        "decision_with_grant_context": _sign_grant(KEY, dict(decision)),
    }


def _refused(encode: Any, values: list[Any]) -> list[Any]:
    """`values`, each checked to be refused by `encode` here, so the vectors say what Python does."""
    for value in values:
        try:
            encode(value)
        except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
            continue
        raise AssertionError(f"{encode.__name__} accepted {value!r}")
    return values


def _canonical_case(value: Any) -> dict[str, Any]:
    case: dict[str, Any] = {"value": value, "value_hex": value_bytes(value).hex(), "value_sha256": value_sha256(value)}
    try:
        case["canonical_hex"] = canonical_bytes(value).hex()
    except TypeError:
        case["canonical_hex"] = None  # floats: the chain's form refuses them
    return case


def vectors() -> dict[str, Any]:
    decisions = _decisions()
    return {
        "about": "Generated by clients/testvectors/generate.py; do not edit by hand (tests check it is current).",
        "python_unicode": unicodedata.unidata_version,
        "key": {"public": KEY.public_text, "key_id": KEY.key_id},
        "other_key": {"public": OTHER_KEY.public_text, "key_id": OTHER_KEY.key_id},
        "now": NOW,
        "canonical": [_canonical_case(value) for value in TRICKY_VALUES + [[n] for n in TRICKY_NUMBERS]],
        "canonical_refused": _refused(canonical_bytes, [[1.5], {"x": -0.25}, *LONE_SURROGATES]),
        "value_refused": _refused(value_bytes, LONE_SURROGATES),
        "action_types": [{"raw": raw, "normalized": normalize_action_type(raw)} for raw in ACTION_TYPES],
        "decisions": decisions,
        "grants": _grants(decisions[0]),
        "crossed": _crossed(decisions[0]),
    }


def render() -> str:
    # ensure_ascii: the lone surrogates above cannot be written as UTF-8, and escapes are unambiguous.
    return json.dumps(vectors(), indent=1, sort_keys=True, ensure_ascii=True) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        VECTORS.write_text(render(), encoding="ascii")
    else:
        sys.stdout.write(render())
