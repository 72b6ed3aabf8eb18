"""Request body parsers for the API.

DRF's JSONParser lets Python's RecursionError escape on deeply nested JSON
(`[[[[...]]]]` a few thousand levels deep), which became a 500; here it is a
400 `parse_error` like any other malformed body (tests/hostile/test_bodies.py).
A body that parses is then checked once for what no field can store (NUL, lone
surrogates, nesting past 64 levels: `inputs.refuse_problems`), naming the field.
"""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from .inputs import refuse_problems

__all__ = ["JSONParser"]


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        refuse_problems(data)
        return data
