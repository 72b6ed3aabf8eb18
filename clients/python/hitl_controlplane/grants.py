"""Execution grants: the server's signed answer to a claim (grant v1).

A claim (`POST /api/v1/requests/{id}/claim/` with a fresh client `nonce`) re-validates
the approved request, takes the lease and answers with the grant token, the exact
approved params and `grant_signature`: the server's signature (its audit signing key,
the same one decisions are signed with) over this document, in the audit chain's
canonical form (canonical.canonical_bytes), prefixed by `hitl-controlplane grant v1\\0`:

    {"type": "hitl-controlplane/grant", "v": 1, "request_id", "revision",
     "agent": {"id", "name"}, "action_type", "params_sha256", "idempotency_key",
     "nonce", "attempt", "lease_until"}

`params_sha256` is the RFC 8785 digest of the granted params (canonical.value_sha256,
the digest a decision's `payload_sha256` gives the approved params); `nonce` the one the
claimant sent, so a grant handed to one process cannot be replayed to another;
`attempt` counts the claims of this request; `lease_until` is `format_timestamp`'s.

The context string and the document type differ from a decision's, so a decision
cannot stand in for a grant, nor a grant for a decision. `verify_grant` is what a
client checks before it runs anything (after the decision verified): the signature
under a pinned key, that the grant binds the same request, revision, agent, action
type and approved params digest as the decision and the nonce this process sent, and
that the params it will hand the tool are the granted ones.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import canonical_bytes, value_sha256
from .ed25519 import SigningKey
from .signed import ALGORITHM, DecisionRefused, SignedKind, open_signed

__all__ = [
    "CONTEXT",
    "DOCUMENT_TYPE",
    "NONCE_PATTERN",
    "VERSION",
    "grant_document",
    "new_nonce",
    "sign_grant",
    "signed_message",
    "verify_grant",
]

DOCUMENT_TYPE = "hitl-controlplane/grant"
VERSION = 1
# Domain separation from decisions (`hitl-controlplane decision v2\0`) and audit rows.
CONTEXT = b"hitl-controlplane grant v1\x00"
# What the server accepts as a claim's nonce; `new_nonce` makes 43 characters.
NONCE_PATTERN = re.compile(r"[A-Za-z0-9_-]{22,128}\Z")


def new_nonce() -> str:
    """A fresh claim nonce: 32 random bytes, base64url without padding (43 characters)."""
    return secrets.token_urlsafe(32)


def grant_document(
    *,
    request_id: str,
    revision: int,
    agent: Mapping[str, Any],
    action_type: str,
    params: Any,
    idempotency_key: str,
    nonce: str,
    attempt: int,
    lease_until: str,
) -> dict[str, Any]:
    """The v1 grant document for one claim of `request_id` (`lease_until` already formatted)."""
    return {
        "type": DOCUMENT_TYPE,
        "v": VERSION,
        "request_id": str(request_id),
        "revision": int(revision),
        "agent": {"id": int(agent["id"]), "name": str(agent["name"])},
        "action_type": action_type,
        "params_sha256": value_sha256(params),
        "idempotency_key": idempotency_key,
        "nonce": nonce,
        "attempt": int(attempt),
        "lease_until": lease_until,
    }


def signed_message(document: Mapping[str, Any]) -> bytes:
    """The bytes a grant signature is over: the grant context, then the canonical document."""
    return CONTEXT + canonical_bytes(dict(document))


# How a claim answer's grant_signature is opened (signed.open_signed): a decision's
# signature, made under the decision context, never matches here.
GRANT = SignedKind(
    field="grant_signature",
    carrier="claim answer",
    noun="grant",
    document_type=DOCUMENT_TYPE,
    version=VERSION,
    message=signed_message,
    altered="forged, altered, or not a grant",
)


def sign_grant(key: SigningKey, document: Mapping[str, Any]) -> dict[str, Any]:
    """The `grant_signature` member of a claim answer (the shape of a resume's `decision_signature`)."""
    return {
        "algorithm": ALGORITHM,
        "key_id": key.key_id,
        "signed": dict(document),
        "signature": key.sign_bytes(signed_message(document)),
    }


def verify_grant(
    answer: Mapping[str, Any],
    keys: Mapping[str, Ed25519PublicKey],
    *,
    decision: Mapping[str, Any],
    nonce: str,
) -> dict[str, Any]:
    """Check that a claim answer is the server's grant for exactly the decided call and this claim.

    `decision`: the signed decision document (`verify_decision`'s result) this client
    acts on; `nonce`: the one this process just sent with its claim. Checks, in order:
    the signature under one of `keys` with the grant context; type and version; that
    the grant names the decision's request, revision, agent and action type, the
    approved params digest and this nonce; and that `answer["params"]` (what the tool
    will receive) are the granted params. Returns the signed grant document; raises
    DecisionRefused naming the first mismatch.
    """
    named = decision.get("request_id")
    if decision.get("verdict") != "approved":
        raise DecisionRefused(f"request {named}: the decision is {decision.get('verdict')!r}, not an approval")
    signed = open_signed(answer, keys, GRANT, named=named)
    expected: dict[str, Any] = {
        "request_id": decision.get("request_id"),
        "revision": decision.get("revision"),
        "params_sha256": decision.get("payload_sha256"),
        "agent": decision.get("agent"),
        "action_type": decision.get("action_type"),
        "nonce": nonce,
    }
    for name, value in expected.items():
        if signed.get(name) != value:
            raise DecisionRefused(
                f"request {named}: the grant's {name} is {signed.get(name)!r}, not {value!r} "
                "(a grant for another call or another claim: replayed, or altered)"
            )
    if "params" not in answer or value_sha256(answer["params"]) != signed["params_sha256"]:
        raise DecisionRefused(
            f"request {named}: the params in the claim answer are not the granted ones (altered in transit)"
        )
    return dict(signed)
