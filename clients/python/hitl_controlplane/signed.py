"""Opening a signed block the server sent: `{algorithm, key_id, signed, signature}`.

A resume's `decision_signature` and a claim answer's `grant_signature` have the same
shape and are opened the same way, in the same order: present and well-formed, signed
by a pinned key, over the document's canonical bytes under its own context string, and
naming the document type and version the caller expects. Only then does the caller
compare the document's fields with what it knows itself (decisions.verify_decision,
grants.verify_grant). Because each document type signs under its own context, a
decision presented as a grant (or the other way round) fails here, at the signature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .ed25519 import verify_bytes

__all__ = ["ALGORITHM", "DecisionRefused", "SignedKind", "open_signed"]

ALGORITHM = "ed25519"


class DecisionRefused(Exception):
    """A signed decision or grant does not bind what the client is about to run to what was approved."""


@dataclass(frozen=True)
class SignedKind:
    """One signed document type, and the words its refusals use."""

    field: str  # the member of the answer that carries the block: "decision_signature"
    carrier: str  # what the answer is, as a person reads it: "resume"
    noun: str  # what the document is: "decision"
    document_type: str
    version: int
    message: Callable[[Mapping[str, Any]], bytes]  # context string + canonical bytes
    altered: str = "forged or altered"  # what a signature mismatch most likely means


def open_signed(
    answer: Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey], kind: SignedKind, *, named: object
) -> Mapping[str, Any]:
    """The signed document in `answer[kind.field]`, once its signature and type are checked.

    `named`: the request the caller is acting on, for the refusal's words. Raises
    DecisionRefused naming the first thing that does not hold.
    """
    block = answer.get(kind.field)
    if not isinstance(block, Mapping):
        raise DecisionRefused(
            f"request {named}: the {kind.carrier} carries no {kind.field} "
            "(an older server, or someone between the server and this client removed it)"
        )
    signed, signature = block.get("signed"), block.get("signature")
    if block.get("algorithm") != ALGORITHM or not isinstance(signed, Mapping) or not isinstance(signature, str):
        raise DecisionRefused(f"request {named}: the {kind.field} is malformed")
    key = keys.get(str(block.get("key_id", "")))
    if key is None:
        raise DecisionRefused(
            f"request {named}: the {kind.noun} is signed by key {block.get('key_id')!r}, which this client does not trust"
        )
    try:
        message = kind.message(signed)
    except (TypeError, ValueError, UnicodeEncodeError):
        raise DecisionRefused(f"request {named}: the signed {kind.noun} is not canonical") from None
    if not verify_bytes(key, message, signature):
        raise DecisionRefused(f"request {named}: the {kind.field} does not match ({kind.altered})")
    if signed.get("type") != kind.document_type or signed.get("v") != kind.version:
        raise DecisionRefused(
            f"request {named}: the signed document is {signed.get('type')!r} v{signed.get('v')!r}, "
            f"not a {kind.document_type} v{kind.version}"
        )
    return signed
