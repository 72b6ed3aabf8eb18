"""Decision signatures: a resume is bound to the exact call it decides (document v2).

The server signs every decided resume payload (`decision_signature`) with its audit
signing key; the client checks it with the public key it was configured with, and
checks that it names the call the client itself submitted, before it runs anything.
A decision forged by whoever sits between the two, one replayed from another
request, another agent or another tool call, one whose request id was swapped in
the submission answer, or one whose params were changed in transit, no longer
matches and is refused. (Client-held approvals are exactly what the OpenAI Agents
SDK warns can be forged or replayed.)

The signed document (v2) is, in the audit chain's canonical form
(canonical.canonical_bytes), prefixed by the context `hitl-controlplane decision v2\0`:

    {"type": "hitl-controlplane/decision", "v": 2, "kind", "agent": {"id", "name"},
     "request_id", "revision", "action_type", "idempotency_key", "tool_call_id",
     "submitted_sha256", "verdict", "payload_sha256", "tool_result_sha256", "execute_by"}

`kind` is `action`, `plan` or `suspension`; `agent` the agent whose token submitted
the request; `action_type` as the server normalized it (`normalize_action_type`);
`idempotency_key` the submission's key (null without one); `tool_call_id` the
submission's ("" without one); `submitted_sha256` the SHA-256 of the canonical bytes
(canonical.value_bytes, RFC 8785) of what the agent submitted (`submitted_value`:
an action's params, a plan's `{path, plan}`, a suspension's suspend payload),
so the client checks it against the call it made; `verdict` is `resume_data.action`;
`payload_sha256` the digest of what the agent acts on (`signed_payload`: the approved
params after any edit, the approved plan, a reviewer's reply `{message}`, or null for
a rejection); `tool_result_sha256` the SHA-256 of the UTF-8 `tool_result` text (what
the model reads, so no one on the way can put other words in its context);
`execute_by` the execution deadline (UTC, `format_timestamp`) or null.
Both sides compute every digest with this module and canonical.py, so server and
client cannot drift apart.

A suspension resumes with the reviewers' answer itself, an object of the host's own
schema that may hold an `action` key of its own, so its verdict is not read from the
answer: it is `answered` (the payload is the answer) or `rejected` (no answer).

Only v2 is emitted and only v2 is accepted: signatures are made when a resume is
read (never stored), so no stored v1 signature needs verifying, and a v1 document
(which names neither the agent nor what it submitted) must not stand in for v2. The
execution grant is its own document type with its own context string, so neither
can pass for the other.

What the client submitted (`SubmittedCall`, `submitted_sha256`) is computed in
`hitl_controlplane.submitted`; this module re-exports it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import canonical_bytes, value_bytes, value_sha256
from .ed25519 import SigningKey, key_id_of, parse_public_key
from .signed import ALGORITHM, DecisionRefused, SignedKind, open_signed
from .submitted import KINDS, PLAN_ACTION_TYPE, SubmittedCall, normalize_action_type, submitted_sha256, submitted_value

__all__ = [
    "ALGORITHM",
    "CONTEXT",
    "DOCUMENT_TYPE",
    "KINDS",
    "PLAN_ACTION_TYPE",
    "SubmittedCall",
    "DecisionRefused",
    "decision_document",
    "normalize_action_type",
    "suspension_document",
    "payload_bytes",
    "payload_sha256",
    "sign_decision",
    "signed_message",
    "signed_payload",
    "submitted_sha256",
    "submitted_value",
    "tool_result_sha256",
    "verify_decision",
]


DOCUMENT_TYPE = "hitl-controlplane/decision"
VERSION = 2
# Domain separation: an audit-row signature (over a row hash), a v1 decision or an
# execution grant (its own context) can never pass as a v2 decision.
CONTEXT = b"hitl-controlplane decision v2\x00"


# The canonical bytes and digest of JSON values: defined once, in canonical.py.
payload_bytes = value_bytes
payload_sha256 = value_sha256


def signed_payload(resume_data: Mapping[str, Any]) -> Any:
    """What the agent acts on when it goes ahead, from the resume data; None otherwise.

    An approved action: its params (exactly as approved, edits included). An approved
    plan: its path, title and text. A reviewer's reply in place of the tool: the reply,
    which the model reads as the tool's result. A rejection carries nothing to act on.
    """
    if resume_data.get("action") == "responded":
        return {"message": resume_data.get("message")}
    if resume_data.get("action") != "approved":
        return None
    if "params" in resume_data:
        return resume_data["params"]
    if "plan" in resume_data:
        return {key: resume_data.get(key) for key in ("path", "title", "plan")}
    return None


def _verdict_and_payload(kind: str, resume_data: Any) -> tuple[Any, str | None]:
    if kind == "suspension":
        return ("rejected" if resume_data is None else "answered"), payload_sha256(resume_data)
    if not isinstance(resume_data, Mapping):
        raise TypeError("an action's or plan's resume data is an object")
    return resume_data.get("action"), payload_sha256(signed_payload(resume_data))


def tool_result_sha256(text: Any) -> str | None:
    """SHA-256 of the UTF-8 of the `tool_result` text the model reads; None when there is none."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if isinstance(text, str) else None


def decision_document(
    *,
    kind: str,
    agent: Mapping[str, Any],
    request_id: str,
    revision: int,
    action_type: str,
    idempotency_key: str | None,
    tool_call_id: str,
    submitted_sha256: str,
    resume_data: Any,
    tool_result: str | None,
    execute_by: str | None,
) -> dict[str, Any]:
    """The v2 document for a decided resume. `resume_data`: a suspension's answer (None unanswered);
    `tool_result`: the text the model reads (so no one on the way can put other words in its context)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    verdict, payload = _verdict_and_payload(kind, resume_data)
    return {
        "type": DOCUMENT_TYPE,
        "v": VERSION,
        "kind": kind,
        "agent": {"id": int(agent["id"]), "name": str(agent["name"])},
        "request_id": str(request_id),
        "revision": int(revision),
        "action_type": action_type,
        "idempotency_key": idempotency_key,
        "tool_call_id": tool_call_id or "",
        "submitted_sha256": submitted_sha256,
        "verdict": verdict,
        "payload_sha256": payload,
        "tool_result_sha256": tool_result_sha256(tool_result),
        "execute_by": execute_by,
    }


def suspension_document(*, answer: Any, **fields: Any) -> dict[str, Any]:
    """The signed document of a suspension's resume: `answer` is its resume_data (None unanswered)."""
    return decision_document(kind="suspension", resume_data=answer, **fields)


def signed_message(document: Mapping[str, Any]) -> bytes:
    """The bytes the signature is over: the context string, then the canonical document."""
    return CONTEXT + canonical_bytes(dict(document))


# How a resume's decision_signature is opened (signed.open_signed), and the words of its refusals.
DECISION = SignedKind(
    field="decision_signature",
    carrier="resume",
    noun="decision",
    document_type=DOCUMENT_TYPE,
    version=VERSION,
    message=signed_message,
)


def sign_decision(key: SigningKey, document: Mapping[str, Any]) -> dict[str, Any]:
    """The `decision_signature` member of a resume payload."""
    return {
        "algorithm": ALGORITHM,
        "key_id": key.key_id,
        "signed": dict(document),
        "signature": key.sign_bytes(signed_message(document)),
    }


def trusted_keys(keys: Iterable[str | Ed25519PublicKey]) -> dict[str, Ed25519PublicKey]:
    """`{key_id: key}` from `ed25519:...` texts (as `manage.py audit_public_key` prints) or keys."""
    parsed = [parse_public_key(key) if isinstance(key, str) else key for key in keys]
    return {key_id_of(key): key for key in parsed}


def verify_decision(
    payload: Mapping[str, Any],
    keys: Mapping[str, Ed25519PublicKey],
    *,
    request_id: str | None = None,
    call: SubmittedCall | None = None,
    tool_call_id: str | None = None,
    action_type: str | None = None,
    now: datetime | None = None,
    suspension: bool = False,
) -> dict[str, Any]:
    """Check that a decided resume payload is the server's v2 decision for exactly this call.

    `call`: the call this client submitted (`SubmittedCall`), as it knows it itself; the
    document must name its agent (when known), kind, action type, submitted digest,
    idempotency key and tool-call id. `request_id`, `tool_call_id` and `action_type`
    (normalized), when given, are checked too; without `call`, `suspension` says the
    payload is a suspension's (otherwise it must be an action's or a plan's). The
    verdict and the payload digest are recomputed from the resume data the caller is
    about to act on, never taken from the signed document. An approval whose
    `execute_by` has passed (by this machine's clock, `now`) is refused too: a genuine
    but stale approval replayed after the server let it lapse must not run. Returns
    the signed document; raises DecisionRefused naming the first mismatch.
    """
    named = request_id if request_id is not None else payload.get("request_id")
    signed = open_signed(payload, keys, DECISION, named=named)
    kind = signed.get("kind")
    if call is not None:
        wanted_kinds: tuple[str, ...] = (call.kind,)
    else:
        wanted_kinds = ("suspension",) if suspension else ("action", "plan")
    if kind not in wanted_kinds:
        raise DecisionRefused(
            f"request {named}: the signed decision's kind is {kind!r}, not "
            f"{' or '.join(wanted_kinds)} (replayed from another kind of call)"
        )
    try:
        verdict, digest = _verdict_and_payload(kind, payload.get("resume_data"))
    except (TypeError, ValueError):
        raise DecisionRefused(f"request {named}: the resume carries no resume data it can act on") from None
    expected: dict[str, Any] = {
        "verdict": verdict,
        "payload_sha256": digest,
        "tool_result_sha256": tool_result_sha256(payload.get("tool_result")),
    }
    if request_id is not None:
        expected["request_id"] = str(request_id)
    if tool_call_id is not None:
        expected["tool_call_id"] = tool_call_id.strip()
    if action_type is not None:
        expected["action_type"] = normalize_action_type(action_type)
    if call is not None:
        expected.update(
            action_type=call.action_type,
            submitted_sha256=call.submitted_sha256,
            tool_call_id=call.tool_call_id,
            idempotency_key=call.idempotency_key,
        )
    for name, value in expected.items():
        if signed.get(name) != value:
            raise DecisionRefused(
                f"request {named}: the signed decision's {name} is {signed.get(name)!r}, "
                f"not {value!r} (not the call this client made: replayed from another call, "
                "or altered)"
            )
    agent = signed.get("agent")
    if not isinstance(agent, Mapping) or not isinstance(agent.get("name"), str):
        raise DecisionRefused(f"request {named}: the signed decision names no agent")
    if call is not None and call.agent is not None and agent["name"] != call.agent:
        raise DecisionRefused(
            f"request {named}: the signed decision is agent {agent['name']!r}'s, not "
            f"{call.agent!r}'s (another agent's approval)"
        )
    if str(payload.get("request_id", signed.get("request_id"))) != str(signed.get("request_id")):
        raise DecisionRefused(
            f"request {named}: the resume names request {payload.get('request_id')!r}, "
            f"the signed decision {signed.get('request_id')!r}"
        )
    deadline = signed.get("execute_by")
    if signed.get("verdict") == "approved" and isinstance(deadline, str):
        moment = now or datetime.now(UTC)
        if datetime.strptime(deadline, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) <= moment:
            raise DecisionRefused(
                f"request {named}: the approval had to be executed by {deadline}; "
                "it has lapsed (a stale approval, replayed?)"
            )
    return dict(signed)
