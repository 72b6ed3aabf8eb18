"""The audit log's filters, shared by the log page, the exports and `audit_export`.

Filters come from query strings (or command-line options) as text, are validated
into an `AuditFilters`, applied to a queryset, and written into an export's
manifest in a stable text form so the manifest says exactly what was asked.

Risk level and rule are read from the audit log itself, not from the approvals
tables: a request's classification event (`request.queued`, `request.auto_approved`
or `request.refused`) carries `risk_level` and `rule` in its metadata, so the
filter selects every event of the requests classified that way, and still works
after a request or rule row is deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime, time, timezone
from typing import Any

from django.db.models import QuerySet
from django.utils.dateparse import parse_date, parse_datetime

from .canonical import format_timestamp
from .models import ActorKind, AuditEvent
from .vocabulary import is_registered

__all__ = ["CLASSIFICATION_VERBS", "FILTER_NAMES", "RISK_LEVELS", "AuditFilters", "FilterError"]

CLASSIFICATION_VERBS = ("request.queued", "request.auto_approved", "request.refused")
# The approvals app's RiskLevel values; repeated here so the audit app reads nothing from approvals.
RISK_LEVELS = ("low", "medium", "high", "critical", "prohibited")


class FilterError(ValueError):
    """A filter value could not be understood; `field` names it, the message says why."""

    code = "invalid_filter"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class AuditFilters:
    """What to select. Empty strings and None mean "no filter on this field".

    `since` is inclusive and `until` exclusive; `actor` matches the actor label
    copied onto each row (a username, an agent name, or a system label) exactly.
    """

    since: datetime | None = None
    until: datetime | None = None
    verb: str = ""
    actor: str = ""
    actor_kind: str = ""
    agent: int | None = None
    request: uuid.UUID | None = None
    risk: str = ""
    rule: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> AuditFilters:
        """Parse `query` (a QueryDict, or a dict of strings); raises FilterError."""

        def text(name: str) -> str:
            value = query.get(name)
            return "" if value is None else str(value).strip()

        verb = text("verb")
        if verb and not is_registered(verb):
            raise FilterError("verb", f"{verb!r} is not a registered audit verb.")
        actor_kind = text("actor_kind")
        if actor_kind and actor_kind not in ActorKind.values:
            raise FilterError("actor_kind", f"actor_kind must be one of {', '.join(ActorKind.values)}.")
        risk = text("risk")
        if risk and risk not in RISK_LEVELS:
            raise FilterError("risk", f"risk must be one of {', '.join(RISK_LEVELS)}.")
        filters = cls(
            since=_parse_moment("since", text("since")),
            until=_parse_moment("until", text("until")),
            verb=verb,
            actor=text("actor"),
            actor_kind=actor_kind,
            agent=_parse_int("agent", text("agent")),
            request=_parse_uuid("request", text("request")),
            risk=risk,
            rule=text("rule"),
        )
        if filters.since and filters.until and filters.since >= filters.until:
            raise FilterError("until", "until must be later than since.")
        return filters

    @property
    def is_empty(self) -> bool:
        return not self.as_text()

    def as_text(self) -> dict[str, str]:
        """The filters in use, as strings: the form written into manifests and query strings."""
        result: dict[str, str] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None or value == "":
                continue
            result[field.name] = format_timestamp(value) if isinstance(value, datetime) else str(value)
        return result

    def apply(self, queryset: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        """Narrow `queryset` of audit events to these filters (one SQL query, no joins)."""
        if self.since:
            queryset = queryset.filter(occurred_at__gte=self.since)
        if self.until:
            queryset = queryset.filter(occurred_at__lt=self.until)
        if self.verb:
            queryset = queryset.filter(verb=self.verb)
        if self.actor:
            queryset = queryset.filter(actor_label=self.actor)
        if self.actor_kind:
            queryset = queryset.filter(actor_kind=self.actor_kind)
        if self.agent is not None:
            queryset = queryset.filter(agent_id=self.agent)
        if self.request is not None:
            queryset = queryset.filter(request_id=self.request)
        if self.risk or self.rule:
            classified = AuditEvent.objects.filter(verb__in=CLASSIFICATION_VERBS, request_id__isnull=False)
            if self.risk:
                classified = classified.filter(metadata__risk_level=self.risk)
            if self.rule:
                classified = classified.filter(metadata__rule=self.rule)
            queryset = queryset.filter(request_id__in=classified.values("request_id"))
        return queryset


def _parse_moment(name: str, value: str) -> datetime | None:
    """An ISO-8601 datetime (naive means UTC) or a date (its midnight, UTC)."""
    if not value:
        return None
    try:
        moment = parse_datetime(value)
        if moment is None:
            day = parse_date(value)
            moment = datetime.combine(day, time.min) if day else None
    except ValueError:
        moment = None
    if moment is None:
        raise FilterError(name, f"{name} must be an ISO-8601 date or date-time, e.g. 2026-01-31T09:00:00Z.")
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _parse_int(name: str, value: str) -> int | None:
    if not value:
        return None
    if not value.isdigit():
        raise FilterError(name, f"{name} must be a whole number.")
    return int(value)


def _parse_uuid(name: str, value: str) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise FilterError(name, f"{name} must be a request UUID.") from None
