"""Serializer fields every API shares: bounded JSON objects that the database can store."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers

__all__ = ["NUL_REFUSED", "BoundedJSONObject", "holds_nul", "json_size"]

NUL_REFUSED = "Null characters are not allowed."  # DRF's CharField wording, for the same refusal


def json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def holds_nul(value: Any) -> bool:
    """Does any key or string in `value` contain U+0000? PostgreSQL's jsonb cannot store it."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False


class BoundedJSONObject(serializers.JSONField):
    """A JSON object no larger than the setting `max_bytes_setting` names, once serialized."""

    def __init__(self, *, max_bytes_setting: str, **kwargs) -> None:
        self.max_bytes_setting = max_bytes_setting
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.", code="not_an_object")
        limit = getattr(settings, self.max_bytes_setting)
        if json_size(value) > limit:
            raise serializers.ValidationError(f"Must be at most {limit} bytes as JSON.", code="too_large")
        if holds_nul(value):  # else the INSERT fails: a 500 instead of a 422
            raise serializers.ValidationError(NUL_REFUSED, code="null_characters_not_allowed")
        return value
