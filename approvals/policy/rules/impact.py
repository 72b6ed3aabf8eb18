"""Server-side impact facts that rules read as ``impact.*``.

The agent never supplies impact: it is computed here from the params and the
resolved target. Action types can add or override keys with extractors registered
by glob (``@register_impact_extractor("send_email")``, matched against normalized
names). All values are JSON-safe; amounts are decimal strings, never floats.

``impact["unknown"]`` lists the facts that could not be read with certainty (see
``facts.py``); rules read them the strict way. Nothing the agent says about its
target lowers a fact: ``target.reversible: true`` is a declaration and is ignored.
Sensitive data is detected in `sensitive` (re-exported here).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from .conditions import to_decimal
from .facts import normalize_key, read_amount, read_target_count
from .names import destructive_words, normalize_pattern, parse_action_type
from .seed import SEED_DESTRUCTIVE_VERBS
from .sensitive import MAX_SCAN_DEPTH, SENSITIVE_LABELS, detect_sensitive

__all__ = [
    "IRREVERSIBLE_PATTERNS",
    "IRREVERSIBLE_VERBS",
    "SENSITIVE_LABELS",
    "ImpactExtractor",
    "compute_impact",
    "count_recipients",
    "detect_sensitive",
    "register_impact_extractor",
    "unregister_impact_extractor",
]


ImpactExtractor = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]


# Historical names; each is now read as a word test ("delete" anywhere in the name's words).
IRREVERSIBLE_PATTERNS: Final[tuple[str, ...]] = ("delete_*", "drop_*", "send_*", "transfer_*", "pay_*")
IRREVERSIBLE_VERBS: Final[frozenset[str]] = frozenset(
    {pattern.rstrip("_*") for pattern in IRREVERSIBLE_PATTERNS} | {"destroy", "truncate", "wipe", "purge"}
)
RECIPIENT_FIELDS: Final[frozenset[str]] = frozenset({"to", "cc", "bcc"})
# Params come from agents, so counting recipients stays bounded too (the scan's limits
# are in `sensitive`).
MAX_RECIPIENT_ITEMS: Final = 10_000


def _split_addresses(text: str) -> Iterator[str]:
    """Split on commas, semicolons and newlines outside quotes and angle brackets."""
    token: list[str] = []
    quoted = False
    angle = False
    for char in text:
        if char == '"' and not angle:
            quoted = not quoted
        elif char == "<" and not quoted:
            angle = True
        elif char == ">" and not quoted:
            angle = False
        elif char in ",;\r\n" and not quoted and not angle:
            yield "".join(token)
            token = []
            continue
        token.append(char)
    yield "".join(token)


def _address_key(token: str) -> str:
    """The comparable address: the part in <...> if present, stripped and lowercased."""
    token = token.strip()
    start, end = token.rfind("<"), token.rfind(">")
    if start != -1 and end > start:
        token = token[start + 1 : end].strip()
    return token.strip("'\" ").lower()


def _recipient_keys(value: Any, depth: int = 0) -> Iterator[str]:
    if depth > 4:
        return
    if isinstance(value, str):
        for token in _split_addresses(value):
            key = _address_key(token)
            if key:
                yield key
    elif isinstance(value, Mapping):
        # APIs often send {"name": ..., "email": ...}; an unknown shape still counts once.
        address = value.get("email") or value.get("address") or value.get("addr")
        if isinstance(address, str) and _address_key(address):
            yield _address_key(address)
        elif value:
            yield f"object:{sorted(map(str, value.items()))}"
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _recipient_keys(item, depth + 1)


def count_recipients(params: Mapping[str, Any]) -> int:
    """Distinct addresses across params to, cc and bcc.

    Keys match as ``facts.normalize_key`` reads them (NFKC, case-folded, surrounding
    punctuation stripped), so ``CC`` and fullwidth ``ｔｏ`` count too. Each field may
    be a string (comma, semicolon or newline separated), a list, or a list of
    ``{"email": ...}`` objects. ``"Name <A@X>"`` and ``"a@x"`` are one
    address. A token without "@" still counts: over-counting is the safe error.
    """
    seen: set[str] = set()
    for key, value in params.items():
        if normalize_key(key) in RECIPIENT_FIELDS:
            for address in _recipient_keys(value):
                seen.add(address)
                if len(seen) >= MAX_RECIPIENT_ITEMS:
                    return len(seen)
    return len(seen)


def _reversible(sent: str, target: Mapping[str, Any], verbs: frozenset[str]) -> bool:
    # The agent may say its call is irreversible (stricter), never that it is reversible.
    if target.get("reversible") is False:
        return False
    return not destructive_words(sent, verbs)


@dataclass(frozen=True)
class _Registered:
    pattern: str
    regex: re.Pattern[str]
    function: ImpactExtractor
    order: int

    @property
    def specificity(self) -> tuple[bool, int, int]:
        literal = not any(char in self.pattern for char in "*?[")
        return (literal, len(self.pattern.replace("*", "")), self.order)


_REGISTRY: dict[str, _Registered] = {}


def register_impact_extractor(pattern: str) -> Callable[[ImpactExtractor], ImpactExtractor]:
    """Register ``fn(params, target, impact) -> dict`` for action types matching ``pattern``.

    Patterns are normalized like rule patterns and match normalized action types.
    Every matching extractor runs, least specific first (globs before literals), so
    the most specific one overrides. An extractor may add sensitive kinds and unknown
    facts but never remove them. Registering the same pattern twice raises ValueError.
    """

    normalized = normalize_pattern(pattern, field="pattern")

    def decorator(function: ImpactExtractor) -> ImpactExtractor:
        if normalized in _REGISTRY:
            raise ValueError(f"an impact extractor is already registered for {pattern!r}")
        _REGISTRY[normalized] = _Registered(
            normalized, re.compile(fnmatch.translate(normalized)), function, len(_REGISTRY)
        )
        return function

    return decorator


def unregister_impact_extractor(pattern: str) -> None:
    """Remove the extractor for ``pattern`` (for tests and plugin unloading)."""
    _REGISTRY.pop(normalize_pattern(pattern, field="pattern"), None)


def _extractors_for(action_type: str) -> list[_Registered]:
    found = [entry for entry in _REGISTRY.values() if entry.regex.match(action_type)]
    return sorted(found, key=lambda entry: entry.specificity)


def _json_safe(value: Any, depth: int = 0) -> Any:
    if depth > MAX_SCAN_DEPTH:
        raise TypeError("impact value is nested too deeply")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, (float, Decimal)):
        number = to_decimal(value)
        if number is None:
            raise TypeError(f"impact value {value!r} is not a finite number")
        return format(number, "f")
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_json_safe(item, depth + 1) for item in items]
    raise TypeError(f"impact value of type {type(value).__name__} is not JSON-safe")


def _listed(value: Any) -> set[str]:
    return {str(item) for item in value} if isinstance(value, list) else set()


def _merge(impact: dict[str, Any], extra: Mapping[str, Any]) -> None:
    detected = set(impact["sensitive_kinds"])
    unknown = set(impact["unknown"])
    was_sensitive = impact["sensitive"]
    impact.update(_json_safe(extra))
    impact["sensitive_kinds"] = sorted(detected | _listed(impact.get("sensitive_kinds")))
    impact["sensitive"] = bool(was_sensitive or impact.get("sensitive") is True or impact["sensitive_kinds"])
    impact["unknown"] = sorted(unknown | _listed(impact.get("unknown")))


def compute_impact(
    action_type: str,
    params: Mapping[str, Any],
    target: Mapping[str, Any] | None = None,
    *,
    sensitive_labels: Iterable[str] = SENSITIVE_LABELS,
    destructive_verbs: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Compute the ``impact`` namespace for one call. JSON-safe; never trusts the agent.

    ``action_type`` is the name as sent (its camelCase words count) or normalized;
    an invalid name raises ``names.ActionTypeError``. Keys: recipient_count (int),
    amount (decimal string or None), target_count (int), reversible (bool: false when
    a word of the name is in IRREVERSIBLE_VERBS or ``destructive_verbs``, the policy's
    list, None meaning the seeded one; or when the agent says ``target.reversible:
    false``), sensitive (bool), sensitive_kinds and unknown (sorted lists of str: the
    facts above that could not be read with certainty), plus whatever registered
    extractors add. Extractor errors propagate: they are code bugs.
    """
    name = parse_action_type(action_type)
    params = params if isinstance(params, Mapping) else {}
    target = target if isinstance(target, Mapping) else {}
    verbs = IRREVERSIBLE_VERBS | frozenset(SEED_DESTRUCTIVE_VERBS if destructive_verbs is None else destructive_verbs)
    kinds = detect_sensitive(params, target, sensitive_labels=sensitive_labels)
    amount, amount_certain = read_amount(params)
    target_count, count_certain = read_target_count(params, target)
    unknown = [key for key, certain in (("amount", amount_certain), ("target_count", count_certain)) if not certain]
    impact: dict[str, Any] = {
        "recipient_count": count_recipients(params),
        "amount": amount,
        "target_count": target_count,
        "reversible": _reversible(name.sent, target, verbs),
        "sensitive": bool(kinds),
        "sensitive_kinds": kinds,
        "unknown": sorted(unknown),
    }
    for entry in _extractors_for(name.normalized):
        _merge(impact, entry.function(params, target, dict(impact)))
    return impact
