"""How long ago, in words, for every page (a template builtin: no `{% load %}`).

``{{ r.created_at|ago }}`` reads "just now" under a minute, then "3 minutes ago",
"2 hours, 5 minutes ago": Django's ``timesince`` alone says "0 minutes", and
"submitted 0 minutes ago" reads like a bug."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()

JUST_NOW_SECONDS = 60


@register.filter
def ago(value: datetime | None, now: datetime | None = None) -> str:
    if not isinstance(value, datetime):
        return ""
    now = now or timezone.now()
    if (now - value).total_seconds() < JUST_NOW_SECONDS:
        return "just now"  # also for a time a little ahead of this clock: never "0 minutes"
    return f"{timesince(value, now)} ago"
