"""Decision signatures: a resume is bound to the exact call it decides.

The server signs every decided resume payload (`decision_signature`) with its audit
signing key; the client checks it with the public key it was configured with
before it runs anything. A decision forged by whoever sits between the two, one
replayed from another request or tool call, or one whose params were changed in
transit, no longer matches and is refused. (Client-held approvals are exactly what
the OpenAI Agents SDK warns can be forged or replayed.)

The signed document is the canonical form (canonical.canonical_bytes) of:

    {"v": 1, "request_id", "revision", "action_type", "tool_call_id",
     "verdict", "payload_sha256", "execute_by"}

`verdict` is `resume_data.action`; `payload_sha256` is the SHA-256 of the canonical
payload the agent will act on (`signed_payload`: the approved params, the approved
plan, or null for a rejection); `execute_by` is the execution deadline (UTC,
`format_timestamp`) or null. Both sides compute `signed_payload` with this module,
so server and client cannot drift apart.

A suspension resumes with the reviewers' answer itself, an object of the host's own
schema that may hold an `action` key of its own, so its verdict is not read from the
answer: it is `answered` (the payload is the answer) or `rejected` (no answer), and
the caller says it is verifying a suspension (`verify_decision(..., suspension=True)`).

Params are agents' JSON and carry floats, which the audit chain's canonical form
refuses; `payload_bytes` writes them as RFC 8785 (JCS) does: keys sorted by UTF-16
code units, numbers as ECMAScript prints them, so a non-Python verifier can
recompute the digest.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import canonical_bytes
from .ed25519 import SigningKey, key_id_of, parse_public_key, verify_bytes

__all__ = [
    "ALGORITHM",
    "DecisionRefused",
    "decision_document",
    "suspension_document",
    "payload_bytes",
    "payload_sha256",
    "sign_decision",
    "signed_payload",
    "verify_decision",
]

ALGORITHM = "ed25519"
VERSION = 1
# Domain separation: an audit-row signature (over a row hash) can never pass as a decision's.
_CONTEXT = b"hitl-controlplane decision v1\x00"


class DecisionRefused(Exception):
    """The resume's decision_signature does not bind it to the call the client is about to run."""


def _number(value: int | float) -> str:
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers here")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError("NaN and infinities are not JSON")
    if value == 0:
        return "0"
    # repr is the shortest round-trip form; ECMAScript's Number::toString lays those digits out.
    sign, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), exponent + len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        mantissa = digits[0] + (f".{digits[1:]}" if k > 1 else "")
        text = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return ("-" if value < 0 else "") + text


def _write(value: Any, out: list[str]) -> None:
    if value is None or isinstance(value, bool):
        out.append(json.dumps(value))
    elif isinstance(value, (int, float)):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("object keys must be strings")
        out.append("{")
        for index, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))):
            out.append("," if index else "")
            out.append(json.dumps(key, ensure_ascii=False) + ":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            out.append("," if index else "")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def payload_bytes(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of a JSON value. Raises TypeError/ValueError for non-JSON."""
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")


def payload_sha256(value: Any) -> str | None:
    return None if value is None else hashlib.sha256(payload_bytes(value)).hexdigest()


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


def decision_document(*, request_id: str, revision: int, action_type: str, tool_call_id: str,
                      resume_data: Mapping[str, Any], execute_by: str | None) -> dict[str, Any]:
    return {"v": VERSION, "request_id": str(request_id), "revision": int(revision), "action_type": action_type,
            "tool_call_id": tool_call_id, "verdict": resume_data.get("action"),
            "payload_sha256": payload_sha256(signed_payload(resume_data)), "execute_by": execute_by}


def suspension_document(*, request_id: str, revision: int, action_type: str, tool_call_id: str,
                        answer: Any, execute_by: str | None) -> dict[str, Any]:
    """The signed document of a suspension's resume: `answer` is its resume_data (None unanswered)."""
    return {"v": VERSION, "request_id": str(request_id), "revision": int(revision), "action_type": action_type,
            "tool_call_id": tool_call_id, "verdict": _suspension_verdict(answer),
            "payload_sha256": payload_sha256(answer), "execute_by": execute_by}


def _suspension_verdict(answer: Any) -> str:
    return "rejected" if answer is None else "answered"


def _message(document: Mapping[str, Any]) -> bytes:
    return _CONTEXT + canonical_bytes(dict(document))


def sign_decision(key: SigningKey, document: Mapping[str, Any]) -> dict[str, Any]:
    """The `decision_signature` member of a resume payload."""
    return {"algorithm": ALGORITHM, "key_id": key.key_id, "signed": dict(document),
            "signature": key.sign_bytes(_message(document))}


def trusted_keys(keys: Iterable[str | Ed25519PublicKey]) -> dict[str, Ed25519PublicKey]:
    """`{key_id: key}` from `ed25519:...` texts (as `manage.py audit_public_key` prints) or keys."""
    parsed = [parse_public_key(key) if isinstance(key, str) else key for key in keys]
    return {key_id_of(key): key for key in parsed}


def verify_decision(payload: Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey], *, request_id: str,
                    tool_call_id: str | None = None, action_type: str | None = None,
                    now: datetime | None = None, suspension: bool = False) -> dict[str, Any]:
    """Check that a decided resume payload is the server's decision for exactly this call.

    `request_id` is the request the client submitted; `tool_call_id` and `action_type`,
    when given, what it submitted them as (the action type as the server normalized it).
    The verdict and the payload are recomputed from the resume data the caller is
    about to act on, never taken from the signed document. An approval whose
    `execute_by` has passed (by this machine's clock, `now`) is refused too: a genuine
    but stale approval replayed after the server let it lapse must not run. Returns
    the signed document; raises DecisionRefused naming the first mismatch.
    """
    block = payload.get("decision_signature")
    if not isinstance(block, Mapping):
        raise DecisionRefused(f"request {request_id}: the resume carries no decision_signature "
                              "(an older server, or someone between the server and this client removed it)")
    signed, signature = block.get("signed"), block.get("signature")
    if block.get("algorithm") != ALGORITHM or not isinstance(signed, Mapping) or not isinstance(signature, str):
        raise DecisionRefused(f"request {request_id}: the decision_signature is malformed")
    key = keys.get(str(block.get("key_id", "")))
    if key is None:
        raise DecisionRefused(f"request {request_id}: the decision is signed by key {block.get('key_id')!r}, "
                              "which this client does not trust")
    try:
        message = _message(signed)
    except (TypeError, ValueError, UnicodeEncodeError):
        raise DecisionRefused(f"request {request_id}: the signed decision is not canonical") from None
    if not verify_bytes(key, message, signature):
        raise DecisionRefused(f"request {request_id}: the decision_signature does not match (forged or altered)")
    resume_data = payload.get("resume_data")
    if suspension:
        expected = {"v": VERSION, "request_id": str(request_id), "verdict": _suspension_verdict(resume_data),
                    "payload_sha256": payload_sha256(resume_data)}
    elif isinstance(resume_data, Mapping):
        expected = {"v": VERSION, "request_id": str(request_id), "verdict": resume_data.get("action"),
                    "payload_sha256": payload_sha256(signed_payload(resume_data))}
    else:
        raise DecisionRefused(f"request {request_id}: the resume carries no resume data")
    if tool_call_id is not None:
        expected["tool_call_id"] = tool_call_id
    if action_type is not None:
        expected["action_type"] = action_type
    for name, value in expected.items():
        if signed.get(name) != value:
            raise DecisionRefused(f"request {request_id}: the signed decision's {name} is {signed.get(name)!r}, "
                                  f"not {value!r} (replayed from another call, or altered)")
    if str(payload.get("request_id", request_id)) != str(request_id):
        raise DecisionRefused(f"request {request_id}: the resume names request {payload.get('request_id')!r}")
    deadline = signed.get("execute_by")
    if signed.get("verdict") == "approved" and isinstance(deadline, str):
        moment = now or datetime.now(timezone.utc)
        if datetime.strptime(deadline, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc) <= moment:
            raise DecisionRefused(f"request {request_id}: the approval had to be executed by {deadline}; "
                                  "it has lapsed (a stale approval, replayed?)")
    return dict(signed)
