"""What every input must be before anything else reads it, checked once at the edge.

PostgreSQL stores neither U+0000 nor a lone UTF-16 surrogate (JSON's "\\ud800"
decodes to one), and Python's own recursion limit sits just past a few hundred
levels of nested JSON: each of those reached the database or a recursive walk and
answered 500. Here they are refused with `invalid_input` naming the field:

- `first_problem(value)` walks parsed JSON without recursion: nesting deeper than
  `MAX_JSON_DEPTH`, or a key or string holding NUL or a lone surrogate;
- `InputEdgeMiddleware` checks every query-string field (names and values) of every
  request, and every form field of the pages (the API's parsers check its bodies);
- `parse_json_text` parses JSON typed into a form or sent to a page's JSON endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils.html import escape

from .codes import register
from .dual_mode import DualModeMiddleware
from .errors import CodedError, is_api_path, json_error

__all__ = [
    "INVALID_INPUT",
    "MAX_JSON_DEPTH",
    "InputEdgeMiddleware",
    "first_problem",
    "parse_json_text",
    "refuse_problems",
    "text_problem",
]

INVALID_INPUT = register(
    "invalid_input",
    400,
    "A value the server cannot store: a NUL character, a lone surrogate, or JSON nested deeper than 64 "
    "levels; `details.field` names it.",
)
MAX_JSON_DEPTH = 64


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def first_problem(value: Any, *, field: str = "") -> tuple[str, str] | None:
    """(field path, what is wrong) for the first unstorable part of parsed JSON, or None."""
    stack: list[tuple[str, Any, int]] = [(field, value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return path or "(body)", f"is nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return path or "(body)", problem
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = text_problem(key) if isinstance(key, str) else None
                if problem:
                    return _path(path, "<key>"), f"has a key that {problem}"
                stack.append((_path(path, key), child, depth + 1))
        elif isinstance(item, list):
            stack.extend((_path(path, index), child, depth + 1) for index, child in enumerate(item))
    return None


def refuse_problems(value: Any, *, field: str = "") -> None:
    """Raise `CodedError(invalid_input)` naming the first unstorable part of `value`."""
    found = first_problem(value, field=field)
    if found is not None:
        path, problem = found
        raise CodedError(INVALID_INPUT, f"{path} {problem}.", field=path)


def parse_json_text(text: str | bytes, *, field: str = "") -> Any:
    """`json.loads` for text from a form or a page's JSON endpoint, checked like the API's bodies.

    Raises ValueError (malformed) like `json.loads`, or `CodedError(invalid_input)`.
    """
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise CodedError(
            INVALID_INPUT,
            f"{field or '(body)'} is nested deeper than {MAX_JSON_DEPTH} levels.",
            field=field or "(body)",
        ) from None
    refuse_problems(value, field=field)
    return value


def _refuse_constant(name: str) -> None:
    # NaN and Infinity are not JSON (RFC 8259) and no JSON column can store them.
    raise ValueError(f"{name} is not a JSON number")


def _fields(request: HttpRequest) -> Iterator[tuple[str, str, str]]:
    """(where, name, value) of every query-string and form field."""
    for name, values in request.GET.lists():
        for value in values:
            yield "query", name, value
    # API bodies are the API's parsers' to check, after authentication (a token that may not
    # call an endpoint hears that first, whatever its body holds).
    if (
        request.method == "POST"
        and not is_api_path(request)
        and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        for name, values in request.POST.lists():
            for value in values:
                yield "form", name, value


def _edge_refusal(request: HttpRequest) -> HttpResponse | None:
    try:
        for where, name, value in _fields(request):
            problem = text_problem(name) or text_problem(value)
            if problem:
                return _refuse(request, f"The {where} field {name!r} {problem}.", field=name)
    except RequestDataTooBig:
        return None  # the body limit answers this one, with its own code
    return None


def _refuse(request: HttpRequest, message: str, *, field: str) -> HttpResponse:
    if is_api_path(request) or "application/json" in request.headers.get("Accept", ""):
        return json_error(INVALID_INPUT, message, field=field)
    return HttpResponseBadRequest(
        f"<!doctype html><title>Bad request</title><h1>Bad request</h1><p>{escape(message)}</p>"
    )


class InputEdgeMiddleware(DualModeMiddleware):
    """Refuse a request whose query string or form holds an unstorable value, naming the field."""

    def blocks(self, request: HttpRequest) -> bool:
        return request.method == "POST" and request.content_type != "application/json"  # reading a form body blocks

    def process(self, request: HttpRequest) -> HttpResponse | None:
        return _edge_refusal(request)
