"""Risk levels, ordered from least to most restrictive."""

from __future__ import annotations

__all__ = ["DEFAULT_LEVEL", "LEVELS", "level_rank"]

LEVELS: tuple[str, ...] = ("low", "medium", "high", "critical", "prohibited")
DEFAULT_LEVEL = "medium"

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
