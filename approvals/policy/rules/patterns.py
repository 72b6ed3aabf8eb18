"""The rule operator ``matches``, run by RE2 in linear time (DESIGN.md "Patterns run
in linear time").

Python's ``re`` backtracks: ``^(a+)+$`` on 27 characters of agent input held a
worker for seconds, doubling with each character. Every pattern an admin writes is
compiled once by RE2 (``compile_pattern``, cached by text, and kept on the compiled
``Condition`` of the compiled policy) and searched by it; ``re`` never runs one.

Two kinds of pattern are a *problem* (``LinearPattern.problem`` says why, in words):

- RE2 cannot compile it: backreferences, lookaround, possessive quantifiers,
  atomic groups, ``\\Z``, ``(?x)``, repetition counts over 1000...;
- it compiles but reads differently there than in ``re``: ``x{,3}`` (``re``: up to
  three x; RE2: the literal text) and ``[[:alpha:]]`` (``re``: a set of those
  characters; RE2: the POSIX class).

Saving such a pattern is refused naming the field (``refuse_problem_patterns``,
called by every path that writes a rule). A rule stored before the switch that has
one keeps loading: its condition reads as UNKNOWN (could match) on every input, so
classification takes its strict reading (DESIGN.md "Classification fails closed")
until a risk-admin rewrites it; the rules page flags it.

Where both engines compile a pattern, they still read a few things differently, and
each is made to read as Python's ``re`` did, or to say it cannot tell:

- ``\\d \\w \\s`` (and ``\\D \\W \\S``) are Unicode-aware in ``re`` and ASCII in RE2:
  they are handed to RE2 as the exact sets ``re`` uses, computed once from the
  running Python (``_shorthand_sets``), so they match the same characters;
- ``\\b \\B``: RE2 has no Unicode word boundary, so on an input holding a non-ASCII
  word character the condition reads as UNKNOWN;
- ``$`` also matches before a final newline in ``re``: on an input ending in a
  newline, UNKNOWN;
- ``(?i)``: the case tables differ only on the Turkish dotless/dotted i
  (``ı``, ``İ``): with one in the input, UNKNOWN (one in the pattern: a problem).

UNKNOWN is never a silent "does not match": the rule counts on its strict reading.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import re2

if TYPE_CHECKING:
    from .rulespec import RuleSpec

__all__ = ["LinearPattern", "MAX_PATTERN_LENGTH", "compile_pattern", "pattern_problems", "refuse_problem_patterns"]

MAX_PATTERN_LENGTH: Final = 500

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the admin's error, answered with the field, not logged
_OPTIONS.max_mem = 8 << 20  # RE2's default, stated: a pattern needing more is refused at compile

# A non-ASCII character Python's \\w matches: where \\b could read differently. Fixed, one character.
_NON_ASCII_WORD: Final = re.compile(r"[^\W\x00-\x7f]")
_DOTTED_I: Final = frozenset("\u0131\u0130")


@functools.cache
def _shorthand_sets() -> dict[str, str]:
    """For d, w, s and their negations: the RE2 class body (no brackets) matching
    exactly what Python's ``re`` matches, found by running ``re`` over every code
    point once (surrogates aside: RE2 reads UTF-8, which has none)."""
    sets = {}
    for letter in "dws":
        found = []
        for low, high in ((0, 0xD7FF), (0xE000, 0x10FFFF)):
            text = "".join(map(chr, range(low, high + 1)))
            found += [(low + match.start(), low + match.end() - 1) for match in re.finditer(rf"\{letter}+", text)]
        sets[letter] = _ranges(found)
        outside, previous = [], -1
        for start, end in found:
            for low, high in ((previous + 1, start - 1),):
                outside += _split_surrogates(low, high)
            previous = end
        outside += _split_surrogates(previous + 1, 0x10FFFF)
        sets[letter.upper()] = _ranges(outside)
    return sets


def _split_surrogates(low: int, high: int) -> list[tuple[int, int]]:
    if low > high:
        return []
    parts = []
    if low < 0xD800:
        parts.append((low, min(high, 0xD7FF)))
    if high > 0xDFFF:
        parts.append((max(low, 0xE000), high))
    return parts


def _ranges(found: list[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{low:x}}}" if low == high else f"\\x{{{low:x}}}-\\x{{{high:x}}}" for low, high in found)


class LinearPattern:
    """A compiled ``matches`` operand. ``search`` is three-valued (True, False, None)."""

    __slots__ = ("text", "problem", "_regex", "_boundary", "_dollar", "_ignore_case")

    def __init__(
        self,
        text: str,
        regex: Any,
        problem: str | None,
        *,
        boundary: bool = False,
        dollar: bool = False,
        ignore_case: bool = False,
    ) -> None:
        self.text = text
        self.problem = problem
        self._regex = regex
        self._boundary = boundary
        self._dollar = dollar
        self._ignore_case = ignore_case

    @property
    def engine(self) -> str:
        """The engine that searches with this pattern: "re2", or "none" for a problem."""
        return "none" if self._regex is None else "re2"

    def search(self, actual: str) -> bool | None:
        """Whether RE2 finds the pattern in ``actual``; None (UNKNOWN) for a problem
        pattern, or where ``re`` could have read this input differently."""
        if self._regex is None:
            return None
        if self._boundary and _NON_ASCII_WORD.search(actual):
            return None
        if self._dollar and actual.endswith("\n"):
            return None
        if self._ignore_case and not _DOTTED_I.isdisjoint(actual):
            return None
        return self._regex.search(actual) is not None

    def __repr__(self) -> str:
        return f"LinearPattern({self.text!r}{', problem' if self.problem else ''})"


def _reason(error: Exception) -> str:
    reason = error.args[0] if error.args else ""
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


@dataclass
class _Reading:
    re2_text: str
    differs: str | None = None
    boundary: bool = False
    dollar: bool = False
    ignore_case: bool = False


def _translate(text: str) -> _Reading:
    """One pass over the pattern: the text handed to RE2 (``\\d \\w \\s`` spelled as
    Python reads them) and what could still read differently."""
    out: list[str] = []
    reading = _Reading("")
    in_class = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            letter = text[index + 1]
            if letter == "Q":  # RE2's literal text up to \E (Python has no \Q: a new pattern only)
                end = text.find("\\E", index + 2)
                end = len(text) if end < 0 else end + 2
                out.append(text[index:end])
                index = end
                continue
            if letter in "dDwWsS":
                body = _shorthand_sets()[letter]
                if in_class:
                    out.append(body)
                else:
                    out.append(f"[{body}]")
            else:
                if letter in "bB" and not in_class:
                    reading.boundary = True
                out.append(text[index : index + 2])
            index += 2
            continue
        if in_class:
            if char == "[" and text.startswith(("[:", "[=", "[."), index):
                reading.differs = "a '[:' inside a set is a POSIX class in RE2 but plain characters in Python's re"
            elif char == "]":
                in_class = False
            out.append(char)
            index += 1
            continue
        if char == "[":
            in_class = True
            # A ']' first in a set (after an optional '^') is a literal in both engines.
            lead = "[^]" if text.startswith("^]", index + 1) else "[]" if text.startswith("]", index + 1) else "["
            out.append(lead)
            index += len(lead)
            continue
        if char == "$":
            reading.dollar = True
        elif char == "{" and text.startswith("{,", index):
            reading.differs = "'{,n}' means 0 to n repeats in Python's re but is plain text in RE2: write '{0,n}'"
        elif char == "(" and text.startswith("(?", index):
            flags = re.match(r"\(\?([a-zA-Z]*)", text[index:])
            if flags and "i" in flags.group(1):
                reading.ignore_case = True
        out.append(char)
        index += 1
    if reading.ignore_case and not _DOTTED_I.isdisjoint(text):
        reading.differs = "'\u0131' and '\u0130' fold case differently in RE2 than in Python's re"
    reading.re2_text = "".join(out)
    return reading


@functools.lru_cache(maxsize=4096)
def compile_pattern(text: str) -> LinearPattern:
    """RE2's compiled ``text`` (cached by text). Never raises for a string: a pattern
    RE2 cannot compile, or reads differently, comes back with ``problem`` set (and
    searches as UNKNOWN). ``conditions`` refuses text Python's ``re`` cannot compile
    either, before this is asked."""
    reading = _translate(text)
    try:
        regex = re2.compile(reading.re2_text, _OPTIONS)
        re2.compile(text, _OPTIONS)  # the admin's own text must compile too (its errors name their syntax)
    except re2.error as error:
        return LinearPattern(text, None, f"the linear-time engine (RE2) cannot run it: {_reason(error)}")
    if reading.differs is not None:
        return LinearPattern(text, None, reading.differs)
    return LinearPattern(
        text, regex, None, boundary=reading.boundary, dollar=reading.dollar, ignore_case=reading.ignore_case
    )


def pattern_problems(spec: RuleSpec) -> list[tuple[str, str]]:
    """``(field, why)`` for each ``matches`` condition of a RuleSpec whose pattern is a
    problem, fields as the editor names them (``conditions[0].value``)."""
    found: list[tuple[str, str]] = []
    for index, condition in enumerate(spec.compiled_conditions):
        problem = condition.pattern_problem
        if problem is not None:
            found.append((f"conditions[{index}].value", problem))
    return found


def refuse_problem_patterns(spec: RuleSpec, *, prefix: str = "") -> None:
    """Raise RuleValidationError naming the first ``matches`` value of ``spec`` that
    RE2 cannot run as written (``prefix`` as in ``rules[3].``)."""
    from .values import RuleValidationError

    for field, why in pattern_problems(spec):
        raise RuleValidationError(f"{prefix}{field}", f"pattern refused: {why}")
