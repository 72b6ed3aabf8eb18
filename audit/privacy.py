"""What of an action's params may reach audit metadata.

Metadata never holds bodies, only `digest()`s (keyed HMAC + size). Some fields
must not leave the database even as digests (a digest still confirms a guess
of a whole value to anyone holding the key): settings.AUDIT_REDACTED_FIELDS
names them per action type, e.g. {"send_email": ["body"], "*": ["password"]}
("*" applies to every action type). Redaction happens when the event is
recorded, because the recorded text is what gets hashed and exported.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.conf import settings

from .chain import digest

__all__ = ["REDACTED", "params_digest", "redacted_fields", "value_digest"]

REDACTED = {"redacted": True}


def redacted_fields(action_type: str) -> frozenset[str]:
    """Top-level param names that must not reach audit metadata for `action_type`."""
    configured = settings.AUDIT_REDACTED_FIELDS
    return frozenset(configured.get(action_type, ())) | frozenset(configured.get("*", ()))


def params_digest(action_type: str, params: Any) -> dict[str, Any]:
    """`digest()` of `params` without the redacted fields, naming the fields left out."""
    hidden = redacted_fields(action_type)
    if not hidden or not isinstance(params, dict):
        return digest(params)
    left_out = sorted(hidden & set(params))
    kept = {key: value for key, value in params.items() if key not in hidden}
    return {**digest(kept), **({"redacted": left_out} if left_out else {})}


def value_digest(action_type: str, field: str, value: Any, *, hidden: Collection[str] = ()) -> dict[str, Any]:
    """`digest()` of one param's value, or a bare marker when that field is redacted
    (configured, or among `hidden`: the params a request masks, whose own digest
    would confirm a guess of the value to anyone holding the key)."""
    if field in hidden or field in redacted_fields(action_type):
        return dict(REDACTED)
    return digest(value)
