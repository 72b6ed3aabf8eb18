"""Serializer fields every API shares: bounded JSON objects that the database can store."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers

from .inputs import refuse_problems

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
        # A JSON body's NUL, lone surrogates and depth are refused by the parser; JSON text in a
        # form field is parsed here, by DRF, so its escapes (`\u0000`, `\ud800`) are checked here,
        # before anything encodes the value.
        refuse_problems(value, field=self.field_name or "")
        limit = getattr(settings, self.max_bytes_setting)
        if json_size(value) > limit:
            raise serializers.ValidationError(f"Must be at most {limit} bytes as JSON.", code="too_large")
        return value
