"""JSON values and paths as rule conditions read them. Pure Python, never raising on data.

``MISSING`` is the value of a path that does not resolve (distinct from JSON null);
``to_decimal`` reads a plainly written number; ``parse_path`` validates a dotted path
and ``resolve`` reads it from a classification document.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Final

__all__ = [
    "MAX_PATH_SEGMENTS",
    "MISSING",
    "PATH_ROOTS",
    "RuleValidationError",
    "is_scalar",
    "json_equal",
    "parse_path",
    "resolve",
    "show",
    "to_decimal",
]

PATH_ROOTS: Final[tuple[str, ...]] = ("params", "target", "impact", "declared")
MAX_PATH_SEGMENTS: Final = 16

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INDEX = re.compile(r"(?:0|[1-9][0-9]{0,5})\Z")
# Bounded digits: a string like "1e999999999" must not become an expensive Decimal.
_DECIMAL_STRING = re.compile(r"[+-]?[0-9]{1,40}(?:\.[0-9]{1,40})?\Z")
_MAX_SHOWN = 80


class RuleValidationError(ValueError):
    """A rule or condition is invalid.

    ``field`` names the offending field the way an admin form would
    (``"conditions[2].op"``); ``message`` says what is wrong in words.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class _Missing:
    """The value of a path that does not resolve (distinct from JSON null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()

# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------


def to_decimal(value: Any) -> Decimal | None:
    """Return ``value`` as a finite Decimal, or None if it is not a number.

    Accepts int, Decimal, float (converted through ``str`` so 0.1 stays 0.1) and
    plain decimal strings such as ``"100.50"``. A bool is not a number.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, float):
        try:
            result = Decimal(str(value))
        except InvalidOperation:
            return None
        return result if result.is_finite() else None
    if isinstance(value, str):
        return _decimal_from_string(value)
    return None


@lru_cache(maxsize=4096)
def _decimal_from_string(text: str) -> Decimal | None:
    # Cached: impact.amount is always a decimal string, and a policy with many
    # thresholds on it would otherwise parse the same string once per condition.
    return Decimal(text) if _DECIMAL_STRING.match(text) else None


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int))


def json_equal(expected: Any, actual: Any) -> bool:
    """JSON equality without Python's surprises (True == 1, 1 == 1.0 as float)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected is actual
    if expected is None:
        return actual is None
    if isinstance(expected, int):
        number = to_decimal(actual)
        return number is not None and number == expected
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    return False


def show(value: Any) -> str:
    """A short JSON-ish rendering of a value for explanations."""
    if value is MISSING:
        return "missing"
    if isinstance(value, Decimal):
        text = str(value)
    else:
        try:
            text = json.dumps(value, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


# ---------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------


def parse_path(path: Any, *, field: str = "path") -> tuple[str | int, ...]:
    """Split a dotted path into segments, refusing anything but the allowed shape.

    The first segment is one of ``PATH_ROOTS``; later segments are identifiers
    (dict keys) or non-negative integers (list indices). Raises RuleValidationError.
    """
    if not isinstance(path, str) or not path:
        raise RuleValidationError(field, "path must be a non-empty string such as 'impact.recipient_count'")
    parts = path.split(".")
    if parts[0] not in PATH_ROOTS:
        raise RuleValidationError(
            field, f"path {path!r} must start with one of {', '.join(p + '.' for p in PATH_ROOTS)}"
        )
    if len(parts) < 2:
        raise RuleValidationError(field, f"path {path!r} names a whole namespace; add a key such as '{parts[0]}.x'")
    if len(parts) > MAX_PATH_SEGMENTS:
        raise RuleValidationError(field, f"path {path!r} is deeper than {MAX_PATH_SEGMENTS} segments")
    segments: list[str | int] = [parts[0]]
    for part in parts[1:]:
        if _IDENTIFIER.match(part):
            segments.append(part)
        elif _INDEX.match(part):
            segments.append(int(part))
        else:
            raise RuleValidationError(
                field, f"path {path!r} has an invalid segment {part!r}; use identifiers or list indices"
            )
    return tuple(segments)


def resolve(doc: Any, segments: tuple[str | int, ...]) -> Any:
    current = doc
    for segment in segments:
        # type() checks first: isinstance against the Mapping ABC is slow on the hot path.
        is_mapping = type(current) is dict or isinstance(current, Mapping)
        if type(segment) is int:
            if type(current) is list or isinstance(current, list):
                if segment >= len(current):
                    return MISSING
                current = current[segment]
                continue
            segment = str(segment)
        if not is_mapping:
            return MISSING
        current = current.get(segment, MISSING)
        if current is MISSING:
            return MISSING
    return current
