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

Where both engines compile a pattern the same, they still differ on a few inputs:
``re``'s ``\\d \\w \\s \\b`` (and their negations) are Unicode-aware and ``\\s`` takes
``\\v`` and ``\\x1c-\\x1f``, RE2's are ASCII; ``re``'s ``$`` also matches before a
final newline; ``(?i)`` folds case by slightly different tables. RE2's answer is
taken as is wherever neither applies; where one does (a pattern using one of those
on an input with a character outside printable ASCII and ``\\t \\n \\r \\f``, or ``$``
on an input ending in a newline), the condition reads as UNKNOWN, never as a
silent "does not match".
"""

from __future__ import annotations

import functools
import re
from typing import Final

import re2

__all__ = ["LinearPattern", "MAX_PATTERN_LENGTH", "compile_pattern", "pattern_problems", "refuse_problem_patterns"]

MAX_PATTERN_LENGTH: Final = 500

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the admin's error, answered with the field, not logged
_OPTIONS.max_mem = 8 << 20  # RE2's default, stated: a pattern needing more is refused at compile

# Characters on which re and RE2 read \d \w \s \b alike.
_PLAIN_INPUT: Final = re.compile(r"[\t\n\r\f\x20-\x7e]*\Z")
_CLASS_SHORTHANDS: Final = frozenset("dDwWsSbB")


class LinearPattern:
    """A compiled ``matches`` operand. ``search`` is three-valued (True, False, None)."""

    __slots__ = ("text", "problem", "_regex", "_shorthands", "_dollar", "_ignore_case")

    def __init__(self, text: str, regex, problem: str | None, *, shorthands: bool, dollar: bool,
                 ignore_case: bool) -> None:
        self.text = text
        self.problem = problem
        self._regex = regex
        self._shorthands = shorthands
        self._dollar = dollar
        self._ignore_case = ignore_case

    @property
    def engine(self) -> str:
        """The engine that searches with this pattern: always "re2" (or "none" for a problem)."""
        return "none" if self._regex is None else "re2"

    def search(self, actual: str) -> bool | None:
        """Whether RE2 finds the pattern in ``actual``; None (UNKNOWN) for a problem
        pattern, or where re and RE2 could read this input differently."""
        if self._regex is None:
            return None
        if (self._shorthands or self._ignore_case) and not _PLAIN_INPUT.match(actual):
            return None
        if self._dollar and actual.endswith("\n"):
            return None
        return self._regex.search(actual) is not None

    def __repr__(self) -> str:
        return f"LinearPattern({self.text!r}{', problem' if self.problem else ''})"


def _reason(error: Exception) -> str:
    reason = error.args[0] if error.args else ""
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def _scan(text: str) -> tuple[str | None, bool, bool, bool]:
    """(reads differently, uses a shorthand class, uses $, uses (?i)) from one pass."""
    shorthands = dollar = ignore_case = False
    differs = None
    in_class = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            if text[index + 1] in _CLASS_SHORTHANDS:
                shorthands = True
            index += 2
            continue
        if in_class:
            if char == "[" and text.startswith(("[:", "[=", "[."), index):
                differs = "a '[:' inside a set is a POSIX class in RE2 but plain characters in Python's re"
            elif char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            # A ']' first in a set (after an optional '^') is a literal in both engines.
            if text.startswith("^]", index + 1):
                index += 2
            elif text.startswith("]", index + 1):
                index += 1
        elif char == "$":
            dollar = True
        elif char == "{" and text.startswith("{,", index):
            differs = "'{,n}' means 0 to n repeats in Python's re but is plain text in RE2: write '{0,n}'"
        elif char == "(" and text.startswith("(?", index):
            flags = re.match(r"\(\?([a-zA-Z]*)", text[index:])
            if flags and "i" in flags.group(1).split("-")[0]:
                ignore_case = True
        index += 1
    return differs, shorthands, dollar, ignore_case


@functools.lru_cache(maxsize=4096)
def compile_pattern(text: str) -> LinearPattern:
    """RE2's compiled ``text`` (cached by text). Never raises for a string: a pattern
    RE2 cannot compile, or reads differently, comes back with ``problem`` set (and
    searches as UNKNOWN). ``conditions`` refuses text Python's ``re`` cannot compile
    either, before this is asked."""
    differs, shorthands, dollar, ignore_case = _scan(text)
    try:
        regex = re2.compile(text, _OPTIONS)
    except re2.error as error:
        return LinearPattern(text, None, f"the linear-time engine (RE2) cannot run it: {_reason(error)}",
                             shorthands=shorthands, dollar=dollar, ignore_case=ignore_case)
    if differs is not None:
        return LinearPattern(text, None, differs, shorthands=shorthands, dollar=dollar, ignore_case=ignore_case)
    return LinearPattern(text, regex, None, shorthands=shorthands, dollar=dollar, ignore_case=ignore_case)


def pattern_problems(spec) -> list[tuple[str, str]]:
    """``(field, why)`` for each ``matches`` condition of a RuleSpec whose pattern is a
    problem, fields as the editor names them (``conditions[0].value``)."""
    found = []
    for index, condition in enumerate(spec.compiled_conditions):
        problem = condition.pattern_problem
        if problem is not None:
            found.append((f"conditions[{index}].value", problem))
    return found


def refuse_problem_patterns(spec, *, prefix: str = "") -> None:
    """Raise RuleValidationError naming the first ``matches`` value of ``spec`` that
    RE2 cannot run as written (``prefix`` as in ``rules[3].``)."""
    from .values import RuleValidationError

    for field, why in pattern_problems(spec):
        raise RuleValidationError(f"{prefix}{field}", f"pattern refused: {why}")
