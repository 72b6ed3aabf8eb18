"""Impact facts read from an agent's params: with certainty, or reported unknown.

An agent chooses how it writes its params, so a fact the server cannot read with
certainty is never guessed low: it is reported unknown, and rules read unknown facts
the strict way (DESIGN.md "Classification fails closed").

Amounts
    Found under any param key that reads ``amount`` once NFKC-normalized, case-folded
    and stripped of surrounding punctuation (``amount``, ``Amount``, ``_AMOUNT``).
    Readable: ints, finite floats and Decimals (not bools); strings after NFKC with
    surrounding whitespace, an optional sign, thousands separators (``,`` or single
    spaces in groups of three, or ``_`` between digits), a decimal point and an
    exponent with ``|exp| <= 30`` (``"5e6"``, ``" 2,500,000 "``, ``"2.5E+6"``);
    ``{"value": ..., "currency": ...}`` objects (keys case-insensitive; nothing else
    in them) whose value reads the same way. Unknown: anything else under an amount
    key, including null, lists, ``"5 million"``, ``"$2,500,000"`` (currency symbols
    are not parsed: send ``{value, currency}``), ``"2.500.000"`` and ``"2,50,000"``
    (separators that could mean a decimal point), two amount keys that disagree, and
    an amount key nested deeper in the params (``{"payment": {"amount": ...}}``, line
    items): which one the tool pays is not ours to guess. No amount key anywhere is
    not unknown: there is no amount.

Target count
    The lengths of the param lists under ``ids`` and ``targets`` (keys matched like
    amounts; several lists add up: over-counting is the safe error). Unknown when
    such a param is not a list, when ``target.ids`` is the only list (only the agent
    vouches for the target), or when ``target.ids`` is a different set of values
    (compared as canonical JSON) from the params' ids. Nothing at all counts 1.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from .names import strip_junk

__all__ = ["MAX_AMOUNT_EXPONENT", "read_amount", "read_target_count", "normalize_key"]

MAX_AMOUNT_EXPONENT: Final = 30
_MAX_AMOUNT_TEXT: Final = 100
# Bounds on looking for nested amounts; params come from agents.
_MAX_NESTING: Final = 32
_MAX_SCANNED_NODES: Final = 20_000
_AMOUNT_KEYS: Final = frozenset({"amount"})
_ID_KEYS: Final = frozenset({"ids", "targets"})
_VALUE_OBJECT_KEYS: Final = frozenset({"value", "currency"})
_AMOUNT_TEXT = re.compile(
    r"""(?P<sign>[+-])?
    (?P<whole>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,3}(?:\ [0-9]{3})+|[0-9]+(?:_[0-9]+)+|[0-9]+)?
    (?:\.(?P<fraction>[0-9]+))?
    (?:[eE](?P<exponent>[+-]?[0-9]{1,4}))?
    \Z""",
    re.VERBOSE,
)


def normalize_key(key: Any) -> str | None:
    """A param key as fact extraction compares it: NFKC, case-folded, punctuation-stripped."""
    if not isinstance(key, str):
        return None
    return strip_junk(unicodedata.normalize("NFKC", key).casefold())


# ---------------------------------------------------------------------------
# Amounts
# ---------------------------------------------------------------------------


def _amount_from_text(text: str) -> Decimal | None:
    text = unicodedata.normalize("NFKC", text).strip()
    if not text or len(text) > _MAX_AMOUNT_TEXT:
        return None
    match = _AMOUNT_TEXT.match(text)
    if match is None or (match["whole"] is None and match["fraction"] is None):
        return None
    if match["exponent"] is not None and abs(int(match["exponent"])) > MAX_AMOUNT_EXPONENT:
        return None
    number = (match["sign"] or "") + re.sub(r"[, _]", "", match["whole"] or "0")
    if match["fraction"] is not None:
        number += "." + match["fraction"]
    if match["exponent"] is not None:
        number += "e" + match["exponent"]
    try:
        return Decimal(number)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid numbers
        return None


def _amount_from_scalar(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        number = Decimal(str(value))
        return number if number.is_finite() else None
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, str):
        return _amount_from_text(value)
    return None


def _amount_from_object(value: Mapping[Any, Any]) -> Decimal | None:
    keys = [normalize_key(key) for key in value]
    if not set(keys) <= _VALUE_OBJECT_KEYS:
        return None
    numbers = [_amount_from_scalar(item) for key, item in zip(keys, value.values()) if key == "value"]
    if not numbers or None in numbers or len(set(numbers)) > 1:
        return None
    return numbers[0]


def _read_one_amount(value: Any) -> Decimal | None:
    if isinstance(value, Mapping):
        return _amount_from_object(value)
    return _amount_from_scalar(value)


def _has_nested_amount(value: Any, depth: int, budget: list[int]) -> bool:
    """Whether an amount key appears anywhere inside ``value``; True when the scan runs out."""
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_NESTING:
        return True  # not scanned, so not known to be free of amounts
    if isinstance(value, Mapping):
        return any(
            normalize_key(key) in _AMOUNT_KEYS or _has_nested_amount(item, depth + 1, budget)
            for key, item in value.items()
        )
    if isinstance(value, (list, tuple)):
        return any(_has_nested_amount(item, depth + 1, budget) for item in value)
    return False


def read_amount(params: Mapping[str, Any]) -> tuple[str | None, bool]:
    """``(amount, certain)``: the amount as a decimal string (never a float), or None.

    ``(None, True)`` when no param is an amount; ``(None, False)`` when an amount is
    present but cannot be read with certainty. See the module docstring for formats.
    """
    numbers: list[Decimal | None] = []
    budget = [_MAX_SCANNED_NODES]
    for key, value in params.items():
        if normalize_key(key) in _AMOUNT_KEYS:
            numbers.append(_read_one_amount(value))
        elif _has_nested_amount(value, 1, budget):
            return None, False
    if not numbers:
        return None, True
    if None in numbers or len({number for number in numbers if number is not None}) > 1:
        return None, False
    first = numbers[0]
    assert first is not None  # for the type checker: None was ruled out above
    return format(first, "f"), True


# ---------------------------------------------------------------------------
# Target count
# ---------------------------------------------------------------------------


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def _as_set(items: list[Any]) -> frozenset[str] | None:
    try:
        return frozenset(_canonical(item) for item in items)
    except (TypeError, ValueError, RecursionError):
        return None


def _lists_under(source: Mapping[str, Any], keys: frozenset[str]) -> tuple[list[list[Any]], bool]:
    """The list values under ``keys`` in ``source``, and whether every such value was a list."""
    lists: list[list[Any]] = []
    all_lists = True
    for key, value in source.items():
        if normalize_key(key) in keys:
            if isinstance(value, (list, tuple)):
                lists.append(list(value))
            else:
                all_lists = False
    return lists, all_lists


def read_target_count(params: Mapping[str, Any], target: Mapping[str, Any]) -> tuple[int, bool]:
    """``(count, certain)``: how many targets the call acts on.

    When uncertain the count is the largest any source suggests (at least 1), for
    display only: rules read an uncertain count as unknown.
    """
    from_params, params_readable = _lists_under(params, _ID_KEYS)
    from_target, target_readable = _lists_under(target, frozenset({"ids"}))
    params_count = sum(len(items) for items in from_params)
    target_count = max((len(items) for items in from_target), default=0)
    certain = params_readable and target_readable
    if from_target and not from_params:
        certain = False
    elif from_target:
        params_set = _as_set([item for items in from_params for item in items])
        target_sets = [_as_set(items) for items in from_target]
        certain = certain and params_set is not None and all(found == params_set for found in target_sets)
    if not from_params and not from_target:
        return 1, certain
    if certain:
        return params_count, True
    return max(params_count, target_count, 1), False
