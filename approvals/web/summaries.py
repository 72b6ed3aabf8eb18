"""One line per request for the queue's list, so ten `send_email` rows can be told apart.

The agent's own words come first when it gave a reason (its first line, marked as its
claim wherever it shows); otherwise a per-action-type template over what anyone may see:
the params as masked (`masking.shown_params`) and the impact as masked, so a template
that names a masked param shows the mask. Templates are `str.format` text over
`params` and `impact` (e.g. ``"{params[subject]}"``); the built-in ones below can be
replaced or extended per action type with the ``REQUEST_SUMMARY_TEMPLATES`` setting.
A template whose names are missing from a request falls back to the next one listed,
then to nothing (the row still shows action type and target).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from .card_parts import show_value

MAX_CHARS = 140

# Each action type: templates tried in order, the first whose names all resolve wins.
BUILT_IN: dict[str, Sequence[str]] = {
    "send_email": (
        "“{params[subject]}” to {impact[recipient_count]} recipient(s)",
        "“{params[subject]}”",
        "To {impact[recipient_count]} recipient(s)",
    ),
    "wire_money": (
        "{params[amount]} {params[currency]} to {params[to]}",
        "{params[amount]} to {params[to]}",
        "{params[amount]}",
    ),
    "transfer": (
        "{params[amount]} {params[currency]} to {params[to]}",
        "{params[amount]} to {params[to]}",
        "{params[amount]}",
    ),
    "delete_records": ("{impact[target_count]} record(s)",),
}


@dataclass(frozen=True)
class Summary:
    text: str
    agents_own: bool  # the agent's words (its claim), not the control plane's


def templates_for(action_type: str) -> Sequence[str]:
    configured = getattr(settings, "REQUEST_SUMMARY_TEMPLATES", None) or {}
    found = configured.get(action_type, BUILT_IN.get(action_type, ()))
    return (found,) if isinstance(found, str) else tuple(found)


class _Shown(dict):
    """A mapping whose values format as the card shows them (lists joined, JSON for the rest)."""

    def __getitem__(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if value in (None, "", [], {}):
            raise KeyError(key)
        return show_value(value)[0]


class _Formatter(string.Formatter):
    """`str.format` limited to ``{params[name]}`` and ``{impact[name]}``: no attribute
    access, so a template cannot reach into the objects behind the values."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if "." in field_name:
            raise KeyError(field_name)
        return super().get_field(field_name, args, kwargs)


def _fill(template: str, params: Mapping[str, Any], impact: Mapping[str, Any]) -> str | None:
    try:
        return _Formatter().vformat(template, (), {"params": _Shown(params), "impact": _Shown(impact)})
    except (KeyError, IndexError, AttributeError, TypeError, ValueError):
        return None


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def summarize(request: Any, shown_params: Mapping[str, Any], shown_impact: Mapping[str, Any]) -> Summary | None:
    """The request's summary line, or None when there is nothing to add to type and target."""
    reason = (getattr(request, "reason", "") or "").strip()
    if reason:
        return Summary(_clip(reason.splitlines()[0]), agents_own=True)
    for template in templates_for(getattr(request, "action_type", "") or ""):
        text = _fill(template, shown_params, shown_impact)
        if text and text.strip():
            return Summary(_clip(text), agents_own=False)
    return None
