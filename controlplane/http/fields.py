"""Serializer fields every API shares: bounded JSON objects that the database can store."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers

__all__ = ["BoundedJSONObject", "json_size"]


def json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


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
        return value  # NUL, lone surrogates and depth: refused by the parser (controlplane/http/inputs.py)
