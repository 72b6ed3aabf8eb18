"""Request body parsers for the API.

DRF's JSONParser lets Python's RecursionError escape on deeply nested JSON
(`[[[[...]]]]` a few thousand levels deep), which became a 500; here it is a
400 `parse_error` like any other malformed body (tests/hostile/test_bodies.py).
"""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError

__all__ = ["JSONParser"]


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
