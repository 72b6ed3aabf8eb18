"""Risk levels, ordered from least to most restrictive, and how outcomes compare."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_LEVEL", "LEVELS", "NO_APPROVAL_LEVELS", "level_rank", "strictness"]

LEVELS: tuple[str, ...] = ("low", "medium", "high", "critical", "prohibited")
DEFAULT_LEVEL = "medium"
# Low runs without approval and prohibited can never be approved, so a rule's
# required_approvals means nothing for them and classification reports 0.
NO_APPROVAL_LEVELS: Final[frozenset[str]] = frozenset({"low", "prohibited"})

_RANK: dict[str, int] = {level: rank for rank, level in enumerate(LEVELS)}


def level_rank(level: str) -> int:
    """Return the position of ``level`` in ``LEVELS`` (0 = low).

    Raises ``ValueError`` for a name that is not a level, so a typo never sorts
    silently as the least restrictive.
    """
    try:
        return _RANK[level]
    except (KeyError, TypeError):
        raise ValueError(f"unknown risk level {level!r}; expected one of {', '.join(LEVELS)}") from None


def strictness(level: str, required_approvals: int) -> tuple[int, int]:
    """The key outcomes are compared by: (level rank, approvals it actually requires).

    Approvals count as 0 for low and prohibited, as classification reports them.
    """
    return level_rank(level), 0 if level in NO_APPROVAL_LEVELS else required_approvals
