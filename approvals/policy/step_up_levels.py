"""Which decisions need a step-up proof: one function for the guard and for every text
that says so (a rule's "Step-up to decide", a dry-run's consequence)."""

from __future__ import annotations

from django.conf import settings

__all__ = ["needs_step_up"]


def needs_step_up(risk_level: str, *, rule_asks: bool = False) -> bool:
    """Whether deciding at `risk_level` (under a rule that may ask for it) needs a proof."""
    return rule_asks or risk_level in settings.STEP_UP_RISK_LEVELS
