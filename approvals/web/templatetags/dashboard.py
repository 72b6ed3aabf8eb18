"""Small formatting helpers for the reviewer dashboard's templates."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for a target or param (autoescaped by the template)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def verb_label(verb: str) -> str:
    """'request.execution_claimed' -> 'execution claimed' (the audit verb, read aloud)."""
    _, _, action = verb.partition(".")
    noun = verb.split(".", 1)[0]
    if noun == "request":
        return action.replace("_", " ")
    return f"{noun.replace('_', ' ')} {action.replace('_', ' ')}"


@register.filter
def risk_colour(level: str) -> str:
    """The colour `RiskLevel` gives a risk level (CSS classes use it); grey for anything else."""
    from approvals.states import RiskLevel

    try:
        return RiskLevel(level).colour
    except ValueError:
        return "grey"


@register.filter
def web_link(url: object) -> str:
    """`url` when it is an http(s) URL with a host, else "": an agent's link shows as a
    link only then (`javascript:`, `data:` and the like stay text)."""
    if not isinstance(url, str):
        return ""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return ""
    return url.strip() if parts.scheme.lower() in ("http", "https") and parts.hostname else ""
