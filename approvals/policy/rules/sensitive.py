"""Whether a call carries sensitive data (`impact.sensitive`, `impact.sensitive_kinds`): card
numbers that pass Luhn, US social security numbers, secrets by their shape or by the key they
are under, and the target's sensitivity labels. Params come from agents, so the scan is
bounded; what it could not inspect is reported as the "unscanned" kind, which counts as
sensitive. `impact.compute_impact` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_SCAN_CHARS", "MAX_SCAN_DEPTH", "MAX_SCAN_NODES", "SENSITIVE_LABELS", "detect_sensitive"]

SENSITIVE_LABELS: Final[frozenset[str]] = frozenset({"pii", "confidential", "secret", "sensitive", "financial"})


# Scanning limits: params come from agents, so the scan must stay bounded. Anything
# beyond them is reported as the "unscanned" kind, which makes the call sensitive:
# content we could not inspect is not assumed clean.
MAX_SCAN_DEPTH: Final = 32
MAX_SCAN_NODES: Final = 20_000
MAX_SCAN_CHARS: Final = 2_000_000


_CARD_CANDIDATE = re.compile(r"(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])")
_SSN = re.compile(r"(?<![0-9-])(?!000|666|9[0-9]{2})[0-9]{3}-(?!00)[0-9]{2}-(?!0000)[0-9]{4}(?![0-9-])")
_SECRET_PATTERNS: Final[tuple[re.Pattern[str], ...]] = (
    re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
    re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}"),
    re.compile(r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
)
_SECRET_KEY_WORDS: Final[frozenset[str]] = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "token",
        "apikey",
        "privatekey",
        "accesskey",
        "credential",
        "credentials",
    }
)
_KEY_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = ord(char) - 48
        if index % 2 == 1:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _has_card_number(text: str) -> bool:
    for match in _CARD_CANDIDATE.finditer(text):
        digits = match.group().replace(" ", "").replace("-", "")
        if 13 <= len(digits) <= 19 and _luhn_valid(digits):
            return True
    return False


def _is_secret_key_name(key: str) -> bool:
    words = [word.lower() for word in _KEY_WORD_SPLIT.split(key) if word]
    joined = "".join(words)
    pairs = {a + b for a, b in zip(words, words[1:])}
    return (
        any(word in _SECRET_KEY_WORDS for word in words)
        or bool(pairs & _SECRET_KEY_WORDS)
        or joined in _SECRET_KEY_WORDS
    )


def _text_kinds(text: str) -> set[str]:
    kinds: set[str] = set()
    if _has_card_number(text):
        kinds.add("card_number")
    if _SSN.search(text):
        kinds.add("national_id")
    if any(pattern.search(text) for pattern in _SECRET_PATTERNS):
        kinds.add("secret")
    return kinds


@dataclass
class _ScanBudget:
    nodes: int = MAX_SCAN_NODES
    chars: int = MAX_SCAN_CHARS
    exhausted: bool = False


def _scan(value: Any, depth: int, budget: _ScanBudget, kinds: set[str]) -> None:
    budget.nodes -= 1
    if budget.nodes < 0 or depth > MAX_SCAN_DEPTH:
        budget.exhausted = True
        return
    if isinstance(value, str):
        budget.chars -= len(value)
        if budget.chars < 0:
            budget.exhausted = True
            return
        kinds.update(_text_kinds(value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                if isinstance(item, str) and item.strip() and _is_secret_key_name(key):
                    kinds.add("secret")
                _scan(key, depth + 1, budget, kinds)
            _scan(item, depth + 1, budget, kinds)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _scan(item, depth + 1, budget, kinds)


def _label_kinds(target: Mapping[str, Any], sensitive_labels: frozenset[str]) -> set[str]:
    labels = target.get("labels")
    if isinstance(labels, str):
        labels = [labels]
    if not isinstance(labels, (list, tuple)):
        return set()
    found = {label.strip().lower() for label in labels if isinstance(label, str)}
    return {f"label:{label}" for label in found & sensitive_labels}


def detect_sensitive(
    params: Mapping[str, Any],
    target: Mapping[str, Any] | None = None,
    *,
    sensitive_labels: Iterable[str] = SENSITIVE_LABELS,
) -> list[str]:
    """Sorted sensitive kinds found in params (recursively) and target labels.

    Kinds: "card_number", "national_id", "secret", "label:<x>", and "unscanned"
    when params exceed the scan limits.
    """
    kinds: set[str] = set()
    budget = _ScanBudget()
    _scan(params, 0, budget, kinds)
    if budget.exhausted:
        kinds.add("unscanned")
    kinds |= _label_kinds(target or {}, frozenset(label.lower() for label in sensitive_labels))
    return sorted(kinds)
