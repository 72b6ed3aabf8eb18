"""Rules in words for the rule pages: ``params.amount ≥ 5000 and impact.reversible is
false``, never ``eq True`` (approvals.policy.tuning.proposal_review words them)."""

from __future__ import annotations

from typing import Any

from django import template

from ...policy.tuning.proposal_review import condition_text

register = template.Library()


@register.filter
def in_words(condition: Any) -> str:
    """One condition: ``{"path": "impact.reversible", "op": "eq", "value": false}`` →
    ``impact.reversible is false``."""
    return condition_text(condition)


@register.filter
def joiner(match: str) -> str:
    """How a rule's conditions combine: ``and`` (all) or ``or`` (any)."""
    return "and" if match == "all" else "or"
