"""Serializer fields every API shares: bounded JSON objects and whole numbers the database can store."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers

from .inputs import refuse_problems

__all__ = ["BoundedJSONObject", "WholeNumberField", "json_size"]


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


class WholeNumberField(serializers.IntegerField):
    """A whole number from `min_value` to `max_value` (both required), and nothing else.

    DRF's IntegerField takes `3.0`, `"3"` and `"3.0"` from JSON; this one takes only a JSON
    integer (never `true`, a float or a string), or, from a form-encoded body, ASCII digits.
    Past the bounds it is refused naming the field (422), never stored as a 500.
    """

    _MAX_DIGITS = 19

    def __init__(self, *, min_value: int, max_value: int, **kwargs: Any) -> None:
        super().__init__(min_value=min_value, max_value=max_value, **kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or isinstance(data, float):
            self.fail("invalid")
        if isinstance(data, str):
            digits = data[1:] if data.startswith("-") else data
            from_form = not _json_body(self.context.get("request"))
            if not (from_form and digits.isascii() and digits.isdigit() and len(digits) <= self._MAX_DIGITS):
                self.fail("invalid")
            data = int(data)
        if not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


def _json_body(request: Any) -> bool:
    content_type = getattr(request, "content_type", "") or ""
    return request is None or "json" in content_type
