"""Action type names: one spelling per name, and the words inside it.

Agents choose how they spell an action type, so every spelling that means the same
name must classify the same (DESIGN.md "Classification fails closed"):
``parse_action_type`` maps ``Delete_Database``, ``delete_database/`` and fullwidth
``ｄｅｌｅｔｅ＿ｄａｔａｂａｓｅ`` to ``delete_database`` and refuses what the documented
syntax does not allow (a Cyrillic ``е``, an inner space or zero-width joiner).

``action_words`` splits a name into words (snake, kebab, dotted and camelCase) so a
policy's destructive verbs are matched word by word: ``delete`` is a word of
``readAndDeleteDatabase`` but ``pay`` is not a word of ``list_payments_report``.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from .conditions import RuleValidationError

__all__ = [
    "MAX_ACTION_TYPE_LENGTH",
    "MAX_DESTRUCTIVE_VERBS",
    "ActionTypeError",
    "ActionTypeName",
    "action_words",
    "destructive_words",
    "normalize_pattern",
    "parse_action_type",
    "strip_junk",
    "validate_destructive_verbs",
]

MAX_ACTION_TYPE_LENGTH: Final = 200
MAX_DESTRUCTIVE_VERBS: Final = 200
# Bounds the work NFKC does on an agent's string; no honest name comes close.
_MAX_RAW_LENGTH: Final = 1000

_NAME_SYNTAX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")
_PATTERN_SYNTAX = re.compile(r"[a-z0-9_.\-*?\[\]!]+\Z")
_VERB_SYNTAX = re.compile(r"[a-z0-9]+\Z")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
# Within a separator-free chunk: an upper-case run before a capitalised word
# (HTTP|Request), a capitalised or lower-case word, an upper-case run, or digits.
_CAMEL_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# The other reading of an upper-case run followed by lower case: DELETE|all.
_UPPER_THEN_LOWER = re.compile(r"([A-Z]{2,})([a-z]+)")
_SYNTAX_HELP = (
    "an action type uses only ASCII letters, digits, '_', '-' and '.', starts with a letter or digit, "
    f"and has at most {MAX_ACTION_TYPE_LENGTH} characters (for example 'github.create_issue')"
)


class ActionTypeError(ValueError):
    """An action type outside the documented syntax; ``message`` says why in words.

    The API answers 422 ``invalid_action_type`` with ``message``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ActionTypeName:
    """A parsed action type.

    ``normalized`` is what rules match and what is stored as the request's action
    type; ``sent`` is the agent's spelling with surrounding junk removed, kept because
    only it shows camelCase word boundaries (``readAndDelete``).
    """

    normalized: str
    sent: str


def _is_junk(char: str) -> bool:
    # Letters and digits of any script are part of a name, never junk: a Cyrillic
    # letter at either end is refused rather than silently dropped.
    return unicodedata.category(char)[0] not in "LN"


def strip_junk(text: str) -> str:
    """``text`` without the characters at either end that are not letters or digits (any script)."""
    start, end = 0, len(text)
    while start < end and _is_junk(text[start]):
        start += 1
    while end > start and _is_junk(text[end - 1]):
        end -= 1
    return text[start:end]


def _first_offender(text: str) -> str:
    for char in text:
        if not (char.isascii() and (char.isalnum() or char in "_-.")):
            return char
    return text[:1]


def _describe_char(char: str) -> str:
    name = unicodedata.name(char, "")
    code = f"U+{ord(char):04X}"
    return f"{char!r} ({code} {name})" if name else f"{char!r} ({code})"


def parse_action_type(raw: Any) -> ActionTypeName:
    """Normalize an agent's action type, or raise ActionTypeError.

    Steps: Unicode NFKC; strip surrounding characters that are not letters or digits
    (whitespace, ``/``, ``_``, ``.``, ``-``, zero-width and other format characters,
    combining marks); that is ``sent``. ``normalized`` is ``sent.casefold()``. Then the
    syntax: ASCII letters, digits, ``_``, ``-``, ``.``; starting with a letter or digit;
    at most 200 characters. A letter NFKC does not map to ASCII (Cyrillic ``е``, ``ß``)
    is refused wherever it stands.
    """
    if not isinstance(raw, str):
        raise ActionTypeError(f"the action type must be a string; {_SYNTAX_HELP}")
    if len(raw) > _MAX_RAW_LENGTH:
        raise ActionTypeError(f"the action type is longer than {_MAX_RAW_LENGTH} characters; {_SYNTAX_HELP}")
    sent = strip_junk(unicodedata.normalize("NFKC", raw))
    if not sent:
        raise ActionTypeError(
            f"the action type is empty once surrounding spaces and punctuation are removed; {_SYNTAX_HELP}"
        )
    if len(sent) > MAX_ACTION_TYPE_LENGTH:
        raise ActionTypeError(f"the action type is longer than {MAX_ACTION_TYPE_LENGTH} characters")
    if not _NAME_SYNTAX.match(sent):
        raise ActionTypeError(
            f"the action type {sent!r} contains {_describe_char(_first_offender(sent))}; {_SYNTAX_HELP}"
        )
    # ASCII only by now, so casefold is lower() and cannot change the length or syntax.
    return ActionTypeName(normalized=sent.casefold(), sent=sent)


def action_words(name: str) -> tuple[str, ...]:
    """The words of ``name``, case-folded, in order (duplicates kept).

    Splits on ``_``, ``-``, ``.``, ``/`` (any non-alphanumeric character), then on
    camelCase boundaries including acronym runs (``HTTPRequestDelete`` gives http,
    request, delete). Digits are words of their own (``delete2`` gives delete, 2), so
    a digit never glues a verb to its neighbour. Pass the ``sent`` spelling: the
    normalized one has lost its camelCase.
    """
    words: list[str] = []
    for chunk in _SEPARATORS.split(name):
        words.extend(word.casefold() for word in _CAMEL_WORDS.findall(chunk))
    return tuple(words)


def _alternative_words(name: str) -> set[str]:
    """Words of the other reading of each upper-case run that runs into lower case.

    ``DELETEall`` reads as DELET|Eall by the acronym rule (as in HTTPRequest) but may
    mean DELETE|all; a destructive verb test must see both readings.
    """
    found: set[str] = set()
    for run, tail in _UPPER_THEN_LOWER.findall(name):
        found.add(run.casefold())
        found.add(tail.casefold())
    return found


def destructive_words(name: str, verbs: Iterable[str]) -> tuple[str, ...]:
    """The verbs from ``verbs`` that are words of ``name`` (the sent spelling), sorted.

    Matches whole words only, on every reading: the camelCase words, both readings of
    an ambiguous upper-case run (``read_DELETEall`` contains delete), and the words
    of the case-folded name split on separators alone, so odd capitals never hide a
    verb (``deLete_files`` contains delete). ``list_payments_report`` does not
    contain pay. ``verbs`` must already be case-folded (``validate_destructive_verbs``).
    """
    words = set(action_words(name)) | _alternative_words(name) | set(_SEPARATORS.split(name.casefold()))
    return tuple(sorted(words.intersection(verbs)))


def validate_destructive_verbs(value: Any) -> tuple[str, ...]:
    """Check a policy's destructive verb list and return it case-folded, in order.

    Each item is a non-empty ASCII word (``[a-z0-9]+`` after casefold), listed once;
    at most 200 items. An empty list is allowed (the admin chose no verbs). Raises
    ``RuleValidationError("destructive_verbs[i]", message)`` naming the bad item.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise RuleValidationError("destructive_verbs", "'destructive_verbs' must be a list of words")
    if len(value) > MAX_DESTRUCTIVE_VERBS:
        raise RuleValidationError(
            "destructive_verbs", f"at most {MAX_DESTRUCTIVE_VERBS} destructive verbs (got {len(value)})"
        )
    verbs: list[str] = []
    for index, item in enumerate(value):
        field = f"destructive_verbs[{index}]"
        if not isinstance(item, str):
            raise RuleValidationError(field, f"{item!r} is not a word")
        verb = item.casefold()
        if not _VERB_SYNTAX.match(verb) or len(verb) > MAX_ACTION_TYPE_LENGTH:
            raise RuleValidationError(
                field, f"{item!r} is not one word of ASCII letters and digits (names are matched word by word)"
            )
        if verb in verbs:
            raise RuleValidationError(field, f"{item!r} is listed twice")
        verbs.append(verb)
    return tuple(verbs)


def normalize_pattern(pattern: str, *, field: str = "action_type") -> str:
    """An action type glob as rules match it: NFKC, case-folded, checked.

    Allowed: the action type characters plus the glob characters ``* ? [ ] !``.
    Raises ``RuleValidationError(field, ...)`` otherwise (a space, ``/``, a non-ASCII
    letter). Lower-case ASCII patterns come back unchanged.
    """
    normalized = unicodedata.normalize("NFKC", pattern).casefold()
    if not _PATTERN_SYNTAX.match(normalized):
        bad = next((c for c in normalized if not (c.isascii() and (c.isalnum() or c in "_.-*?[]!"))), normalized[:1])
        raise RuleValidationError(
            field,
            f"pattern {pattern!r} contains {_describe_char(bad) if bad else 'nothing'}; a pattern uses "
            "ASCII letters, digits, '_', '-', '.' and the glob characters * ? [ ] !",
        )
    return normalized
