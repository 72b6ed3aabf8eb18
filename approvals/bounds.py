"""The bounds of every whole number an admin, a reviewer or an agent sets, in one table.

Each bound fits the column the number is stored in (with room to spare) and the
arithmetic done with it (`now + timedelta(seconds=...)` must stay a date), so a
number past it is refused at the edge naming the field (422, a form error), never
by the database or the datetime library as a 500. Pure Python: the rules engine
(`approvals.policy.rules`, no Django) checks its fields with it too.

    problem = BOUNDS["priority"].problem(value)   # None, or what is wrong, naming the field
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["BOUNDS", "YEAR_SECONDS", "Bound", "whole_number_problem"]

YEAR_SECONDS: Final = 366 * 24 * 3600


@dataclass(frozen=True)
class Bound:
    name: str
    low: int
    high: int

    def problem(self, value: Any) -> str | None:
        """Why `value` is not a whole number within this bound (naming the field), or None.

        Only a real int counts: a bool, a float (even 3.0), a numeric string are refused.
        """
        return whole_number_problem(value, self.name, self.low, self.high)


def whole_number_problem(value: Any, name: str, low: int, high: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"'{name}' must be a whole number from {low} to {high}"
    if not low <= value <= high:
        shown = value if abs(value) < 10**12 else f"a {len(str(abs(value)))}-digit number"
        return f"'{name}' must be from {low} to {high} (got {shown})"
    return None


BOUNDS: Final[dict[str, Bound]] = {
    bound.name: bound
    for bound in (
        # Risk rules (RiskRule: IntegerField, PositiveSmallIntegerField, PositiveIntegerField).
        Bound("priority", -1_000_000_000, 1_000_000_000),
        Bound("required_approvals", 1, 100),
        Bound("decision_ttl_seconds", 1, YEAR_SECONDS),
        Bound("execution_window_seconds", 1, YEAR_SECONDS),
        # A rule's notification settings (RuleNotification: PositiveIntegerField); 0 = none.
        Bound("remind_before_seconds", 0, YEAR_SECONDS),
        Bound("escalate_after_seconds", 0, YEAR_SECONDS),
        Bound("max_extension_seconds", 0, YEAR_SECONDS),
        # A reviewer's deadline extension (within the rule's max_extension_seconds besides).
        Bound("seconds", 1, YEAR_SECONDS),
        # The revision a decision names (ParamsRevision.number: PositiveIntegerField).
        Bound("revision", 1, 2**31 - 1),
    )
}
