"""Rule conditions: validated once, evaluated many times, never raising.

A condition is JSON data an admin edits: ``{"path": "impact.recipient_count",
"op": "gt", "value": 10}``. ``compile_condition`` validates it and returns a
``Condition`` whose ``evaluate(doc)`` reads the path from a classification document
(``{"params": ..., "target": ..., "impact": ..., "declared": ...}``).

Evaluation is total: a missing path, a wrong type or a surprising value makes the
condition false (only ``exists=false`` is true for a missing path); it never raises,
because a rule set admins edit at runtime must not be able to break classification.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

__all__ = [
    "MISSING",
    "OPERATORS",
    "PATH_ROOTS",
    "Condition",
    "RuleValidationError",
    "compile_condition",
    "parse_path",
    "to_decimal",
]

OPERATORS: Final[tuple[str, ...]] = (
    "eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "matches", "len_gt", "exists",
)
PATH_ROOTS: Final[tuple[str, ...]] = ("params", "target", "impact", "declared")
MAX_PATTERN_LENGTH: Final = 500
MAX_PATH_SEGMENTS: Final = 16
CONDITION_KEYS: Final[tuple[str, ...]] = ("path", "op", "value")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INDEX = re.compile(r"(?:0|[1-9][0-9]{0,5})\Z")
# Bounded digits: a string like "1e999999999" must not become an expensive Decimal.
_DECIMAL_STRING = re.compile(r"[+-]?[0-9]{1,40}(?:\.[0-9]{1,40})?\Z")
_SYMBOLS: Final[dict[str, str]] = {
    "eq": "==", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=",
    "in": "in", "contains": "contains", "matches": "matches", "len_gt": "length >",
}
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
_UNRESOLVED: Final = object()


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
    if isinstance(value, str) and _DECIMAL_STRING.match(value):
        return Decimal(value)
    return None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int))


def _equal(expected: Any, actual: Any) -> bool:
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


def _show(value: Any) -> str:
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


def _resolve(doc: Any, segments: tuple[str | int, ...]) -> Any:
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


# ---------------------------------------------------------------------------
# Operators: each has a validator (rule value -> compiled operand) and a test
# (operand, actual -> bool). Tests may assume the operand passed validation.
# ---------------------------------------------------------------------------


def _check_scalar(value: Any, field: str, op: str) -> Any:
    if not _is_scalar(value):
        raise RuleValidationError(field, f"'{op}' needs a string, integer, boolean or null value")
    return value


def _check_number(value: Any, field: str, op: str) -> Decimal | int:
    number = None if isinstance(value, float) else to_decimal(value)
    if number is None or isinstance(value, Decimal):
        raise RuleValidationError(
            field, f"'{op}' needs a number: an integer or a decimal string like \"100.50\" (got {_show(value)})"
        )
    # Integral operands compare as int: int against int is four times cheaper than
    # int against Decimal, and both compare exactly with every actual value we accept.
    return int(number) if number == number.to_integral_value() else number


def _check_list(value: Any, field: str, op: str) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value:
        raise RuleValidationError(field, f"'{op}' needs a non-empty list of values")
    for index, item in enumerate(value):
        if not _is_scalar(item):
            raise RuleValidationError(f"{field}[{index}]", "list items must be strings, integers, booleans or null")
    return tuple(value)


def _check_pattern(value: Any, field: str, op: str) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise RuleValidationError(field, f"'{op}' needs a regular expression string")
    if len(value) > MAX_PATTERN_LENGTH:
        raise RuleValidationError(field, f"pattern is longer than {MAX_PATTERN_LENGTH} characters")
    try:
        return re.compile(value)
    except re.error as exc:
        raise RuleValidationError(field, f"pattern does not compile: {exc}") from None


def _check_length(value: Any, field: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuleValidationError(field, f"'{op}' needs a non-negative integer")
    return value


def _check_bool(value: Any, field: str, op: str) -> bool:
    if not isinstance(value, bool):
        raise RuleValidationError(field, f"'{op}' needs true or false")
    return value


def _compare(test: Callable[[Any, Decimal], bool]) -> Callable[[Any, Any], bool]:
    def run(operand: Decimal | int, actual: Any) -> bool:
        # Fast path: Decimal compares exactly with int, no conversion needed.
        if type(actual) is int:
            return test(actual, operand)
        number = to_decimal(actual)
        return number is not None and test(number, operand)

    return run


def _contains(operand: Any, actual: Any) -> bool:
    if isinstance(actual, str):
        return isinstance(operand, str) and operand in actual
    if isinstance(actual, list):
        return any(_equal(operand, item) for item in actual)
    if isinstance(actual, Mapping):
        return isinstance(operand, str) and operand in actual
    return False


def _length(actual: Any) -> int | None:
    return len(actual) if isinstance(actual, (str, list, Mapping)) else None


_Validator = Callable[[Any, str, str], Any]
_Test = Callable[[Any, Any], bool]

_OPERATORS: Final[dict[str, tuple[_Validator, _Test]]] = {
    "eq": (_check_scalar, lambda operand, actual: _equal(operand, actual)),
    "ne": (_check_scalar, lambda operand, actual: not _equal(operand, actual)),
    "gt": (_check_number, _compare(lambda a, b: a > b)),
    "gte": (_check_number, _compare(lambda a, b: a >= b)),
    "lt": (_check_number, _compare(lambda a, b: a < b)),
    "lte": (_check_number, _compare(lambda a, b: a <= b)),
    "in": (_check_list, lambda operand, actual: any(_equal(item, actual) for item in operand)),
    "contains": (_check_scalar, _contains),
    "matches": (_check_pattern, lambda operand, actual: isinstance(actual, str) and operand.search(actual) is not None),
    "len_gt": (_check_length, lambda operand, actual: (n := _length(actual)) is not None and n > operand),
    "exists": (_check_bool, lambda operand, actual: (actual is not None) is operand),
}


# ---------------------------------------------------------------------------
# Condition
# ---------------------------------------------------------------------------


class Condition:
    """A validated condition. Build with ``compile_condition``, not directly.

    ``path``, ``op`` and ``value`` are the admin's JSON data (``to_dict`` returns
    them unchanged); the compiled operand and path segments are private.
    """

    __slots__ = ("path", "op", "value", "_segments", "_operand", "_test")

    def __init__(self, path: str, op: str, value: Any, segments: tuple[str | int, ...], operand: Any) -> None:
        self.path = path
        self.op = op
        self.value = value
        self._segments = segments
        self._operand = operand
        self._test = _OPERATORS[op][1]

    @property
    def root(self) -> str:
        """The namespace the path reads: params, target, impact or declared."""
        return str(self._segments[0])

    @property
    def param_name(self) -> str | None:
        """The top-level param the path reads, for ``params.*`` paths."""
        return str(self._segments[1]) if self._segments[0] == "params" else None

    def holds(self, doc: Mapping[str, Any], resolved: dict[str, Any] | None = None) -> bool:
        """``evaluate(doc)[0]``, without building the tuple (the classify hot path).

        ``resolved`` memoizes path lookups across the conditions of one classification:
        with many rules most conditions read the same few paths of the same document.
        """
        if resolved is None:
            actual = _resolve(doc, self._segments)
        else:
            actual = resolved.get(self.path, _UNRESOLVED)
            if actual is _UNRESOLVED:
                actual = resolved[self.path] = _resolve(doc, self._segments)
        if actual is MISSING:
            return self.op == "exists" and self._operand is False
        try:
            return bool(self._test(self._operand, actual))
        except Exception:  # noqa: BLE001 - evaluation must never break classification
            return False

    def evaluate(self, doc: Mapping[str, Any]) -> tuple[bool, Any]:
        """Return (held, actual). ``actual`` is ``MISSING`` when the path does not resolve.

        Never raises: a missing path or a value of the wrong type is simply false.
        (``exists`` treats JSON null as absent.)
        """
        actual = _resolve(doc, self._segments)
        if actual is MISSING:
            return (self.op == "exists" and self._operand is False), actual
        try:
            return bool(self._test(self._operand, actual)), actual
        except Exception:  # noqa: BLE001 - evaluation must never break classification
            return False, actual

    def describe(self, actual: Any = MISSING, *, redact: bool = False) -> str:
        """Human text such as ``impact.recipient_count > 10 (was 14)``.

        With ``redact=True`` the actual value is shown as ``***`` (for masked params).
        """
        if self.op == "exists":
            return f"{self.path} {'exists' if self.value else 'does not exist'}"
        shown = "***" if redact and actual is not MISSING else _show(actual)
        if self.op == "len_gt" and not redact and (length := _length(actual)) is not None:
            shown = str(length)
        return f"{self.path} {_SYMBOLS[self.op]} {_show(self.value)} (was {shown})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON data this condition was compiled from."""
        value = list(self.value) if isinstance(self.value, (list, tuple)) else self.value
        return {"path": self.path, "op": self.op, "value": value}

    def __repr__(self) -> str:
        return f"Condition({self.path!r}, {self.op!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.path, self.op))


def compile_condition(data: Any, *, field: str = "condition") -> Condition:
    """Validate condition data and return a ``Condition``.

    ``data`` must be a dict with exactly ``path``, ``op`` and ``value``. ``field`` is
    the prefix used in error fields (``"conditions[2]"`` gives ``"conditions[2].op"``).
    Raises RuleValidationError naming the first offending field.
    """
    if not isinstance(data, Mapping):
        raise RuleValidationError(field, "a condition must be an object with path, op and value")
    unknown = sorted(str(key) for key in data if key not in CONDITION_KEYS)
    if unknown:
        raise RuleValidationError(
            f"{field}.{unknown[0]}", f"unknown key {unknown[0]!r}; expected one of {', '.join(CONDITION_KEYS)}"
        )
    for key in CONDITION_KEYS:
        if key not in data:
            raise RuleValidationError(f"{field}.{key}", f"'{key}' is required")
    op = data["op"]
    if not isinstance(op, str) or op not in _OPERATORS:  # a list or dict here is unhashable
        raise RuleValidationError(f"{field}.op", f"unknown operator {op!r}; expected one of {', '.join(OPERATORS)}")
    segments = parse_path(data["path"], field=f"{field}.path")
    value = data["value"]
    validate, _ = _OPERATORS[op]
    operand = validate(value, f"{field}.value", op)
    stored = list(value) if isinstance(value, list) else value
    return Condition(data["path"], op, stored, segments, operand)
