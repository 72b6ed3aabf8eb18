"""Rule conditions: validated once, evaluated many times, never raising.

A condition is JSON data an admin edits: ``{"path": "impact.recipient_count",
"op": "gt", "value": 10}``. ``compile_condition`` validates it and returns a
``Condition`` whose ``evaluate(doc)`` reads the path from a classification document
(``{"params": ..., "target": ..., "impact": ..., "declared": ...}``).

Evaluation is total: a missing path, a wrong type or a surprising value makes the
condition false (only ``exists=false`` is true for a missing path); it never raises,
because a rule set admins edit at runtime must not be able to break classification.

Classification reads conditions three-valued (``Condition.truth``): a numeric
comparison on a ``params.*`` value that is missing or not plainly a number is
``UNKNOWN`` (None), never false, so an agent cannot dodge a threshold by writing
``"5e6"``. ``evaluation.py`` adds the other unknowns (unreadable impact facts, and
``target.*`` that only the agent vouches for).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from ...masking import MASK
from .patterns import MAX_PATTERN_LENGTH, LinearPattern, compile_pattern
from .values import (
    MISSING,
    PATH_ROOTS,
    RuleValidationError,
    is_scalar,
    json_equal,
    parse_path,
    resolve,
    show,
    to_decimal,
)

__all__ = [
    "MISSING",
    "MAX_PATTERN_LENGTH",
    "NUMERIC_OPERATORS",
    "OPERATORS",
    "PATH_ROOTS",
    "Condition",
    "UNKNOWN",
    "RuleValidationError",
    "Truth",
    "compile_condition",
    "parse_path",
    "to_decimal",
]

OPERATORS: Final[tuple[str, ...]] = (
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "contains",
    "matches",
    "len_gt",
    "exists",
)
NUMERIC_OPERATORS: Final[frozenset[str]] = frozenset({"gt", "gte", "lt", "lte"})
CONDITION_KEYS: Final[tuple[str, ...]] = ("path", "op", "value")

_SYMBOLS: Final[dict[str, str]] = {
    "eq": "==",
    "ne": "!=",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "in": "in",
    "contains": "contains",
    "matches": "matches",
    "len_gt": "length >",
}


# Three-valued truth: True, False, or UNKNOWN (None) when the value could be read
# either way. None keeps the classify hot path free of enum lookups.
Truth = bool | None
UNKNOWN: Final = None
_UNRESOLVED: Final = object()


# ---------------------------------------------------------------------------
# Operators: each has a validator (rule value -> compiled operand) and a test
# (operand, actual -> bool). Tests may assume the operand passed validation.
# ---------------------------------------------------------------------------


def _check_scalar(value: Any, field: str, op: str) -> Any:
    if not is_scalar(value):
        raise RuleValidationError(field, f"'{op}' needs a string, integer, boolean or null value")
    return value


def _check_number(value: Any, field: str, op: str) -> Decimal | int:
    number = None if isinstance(value, float) else to_decimal(value)
    if number is None or isinstance(value, Decimal):
        raise RuleValidationError(
            field, f"'{op}' needs a number: an integer or a decimal string like \"100.50\" (got {show(value)})"
        )
    # Integral operands compare as int: int against int is four times cheaper than
    # int against Decimal, and both compare exactly with every actual value we accept.
    return int(number) if number == number.to_integral_value() else number


def _check_list(value: Any, field: str, op: str) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value:
        raise RuleValidationError(field, f"'{op}' needs a non-empty list of values")
    for index, item in enumerate(value):
        if not is_scalar(item):
            raise RuleValidationError(f"{field}[{index}]", "list items must be strings, integers, booleans or null")
    return tuple(value)


def _check_pattern(value: Any, field: str, op: str) -> LinearPattern:
    """RE2's compiled pattern (``patterns``). Text neither RE2 nor Python's ``re``
    compiles is refused here; one only ``re`` compiles (a rule stored before RE2)
    comes back with ``problem`` set: it reads as UNKNOWN, and saving it is refused
    by ``patterns.refuse_problem_patterns`` on every write path."""
    if not isinstance(value, str):
        raise RuleValidationError(field, f"'{op}' needs a regular expression string")
    if len(value) > MAX_PATTERN_LENGTH:
        raise RuleValidationError(field, f"pattern is longer than {MAX_PATTERN_LENGTH} characters")
    pattern = compile_pattern(value)
    if pattern.engine != "re2":
        try:  # only to tell "not a pattern at all" from "a Python-only pattern"; re never searches
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # "possible nested set": a problem already
                re.compile(value)
        except (re.error, OverflowError, RecursionError) as exc:
            raise RuleValidationError(field, f"pattern does not compile: {pattern.problem or exc}") from None
    return pattern


def _matches(operand: LinearPattern, actual: Any) -> bool | None:
    # None (UNKNOWN) where RE2 cannot answer for this pattern or this input (patterns.py).
    return operand.search(actual) if isinstance(actual, str) else False


def _check_length(value: Any, field: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuleValidationError(field, f"'{op}' needs a non-negative integer")
    return int(value)


def _check_bool(value: Any, field: str, op: str) -> bool:
    if not isinstance(value, bool):
        raise RuleValidationError(field, f"'{op}' needs true or false")
    return value


def _compare(test: Callable[[Any, Decimal | int], bool]) -> Callable[[Any, Any], bool]:
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
        return any(json_equal(operand, item) for item in actual)
    if isinstance(actual, Mapping):
        return isinstance(operand, str) and operand in actual
    return False


def _length(actual: Any) -> int | None:
    return len(actual) if isinstance(actual, (str, list, Mapping)) else None


_Validator = Callable[[Any, str, str], Any]
_Test = Callable[[Any, Any], bool | None]  # None: UNKNOWN (a pattern RE2 cannot answer for)

_OPERATORS: Final[dict[str, tuple[_Validator, _Test]]] = {
    "eq": (_check_scalar, lambda operand, actual: json_equal(operand, actual)),
    "ne": (_check_scalar, lambda operand, actual: not json_equal(operand, actual)),
    "gt": (_check_number, _compare(lambda a, b: a > b)),
    "gte": (_check_number, _compare(lambda a, b: a >= b)),
    "lt": (_check_number, _compare(lambda a, b: a < b)),
    "lte": (_check_number, _compare(lambda a, b: a <= b)),
    "in": (_check_list, lambda operand, actual: any(json_equal(item, actual) for item in operand)),
    "contains": (_check_scalar, _contains),
    "matches": (_check_pattern, _matches),
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

    __slots__ = ("path", "op", "value", "impact_key", "_segments", "_operand", "_test", "_strict_number")

    def __init__(self, path: str, op: str, value: Any, segments: tuple[str | int, ...], operand: Any) -> None:
        self.path = path
        self.op = op
        self.value = value
        self._segments = segments
        self._operand = operand
        self._test = _OPERATORS[op][1]
        # The impact fact this path reads (None outside impact.*): impact["unknown"] names facts by key.
        self.impact_key: str | None = str(segments[1]) if segments[0] == "impact" else None
        # A threshold on an agent's param must not be dodged by spelling the number oddly.
        self._strict_number = segments[0] == "params" and op in NUMERIC_OPERATORS

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
            actual = resolve(doc, self._segments)
        else:
            actual = resolved.get(self.path, _UNRESOLVED)
            if actual is _UNRESOLVED:
                actual = resolved[self.path] = resolve(doc, self._segments)
        if actual is MISSING:
            return self.op == "exists" and self._operand is False
        try:
            return bool(self._test(self._operand, actual))
        except Exception:  # noqa: BLE001 - evaluation must never break classification
            return False

    def resolve(self, doc: Mapping[str, Any]) -> Any:
        """The value this condition's path reads in ``doc``, or ``MISSING``."""
        return resolve(doc, self._segments)

    def truth(self, actual: Any) -> Truth:
        """Three-valued test of an already-resolved value (``MISSING`` if absent).

        UNKNOWN for gt/gte/lt/lte on a ``params.*`` value that is missing or not plainly
        a number (an int, finite float or Decimal that is not a bool, or a decimal string
        like "100.50"); otherwise True or False exactly as ``evaluate``. Never raises.
        """
        if self._strict_number:
            number = actual if type(actual) is int else to_decimal(actual)
            if number is None:
                return UNKNOWN
            actual = number
        elif actual is MISSING:
            return self.op == "exists" and self._operand is False
        try:
            result = self._test(self._operand, actual)
        except Exception:  # noqa: BLE001 - evaluation must never break classification
            return False
        return UNKNOWN if result is None else bool(result)  # only `matches` answers None

    @property
    def pattern_problem(self) -> str | None:
        """Why RE2 cannot run this condition's ``matches`` pattern as written (it then
        reads as UNKNOWN), or None."""
        return self._operand.problem if isinstance(self._operand, LinearPattern) else None

    def evaluate(self, doc: Mapping[str, Any]) -> tuple[bool, Any]:
        """Return (held, actual). ``actual`` is ``MISSING`` when the path does not resolve.

        Never raises: a missing path or a value of the wrong type is simply false.
        (``exists`` treats JSON null as absent.)
        """
        actual = resolve(doc, self._segments)
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
            return self.test_text()
        shown = MASK if redact and actual is not MISSING else show(actual)
        if self.op == "len_gt" and not redact and (length := _length(actual)) is not None:
            shown = str(length)
        return f"{self.test_text()} (was {shown})"

    def test_text(self) -> str:
        """The test alone, as an admin wrote it: ``impact.amount > 1000000``."""
        if self.op == "exists":
            return f"{self.path} {'exists' if self.value else 'does not exist'}"
        return f"{self.path} {_SYMBOLS[self.op]} {show(self.value)}"

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
