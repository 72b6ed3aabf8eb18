"""The audit log's one filter, shared by the log page, the exports and `audit_export`.

Filters come from query strings (or command-line options) as text, are validated
by `AuditEventFilterSet`'s form (`from_query` raises `FilterError` naming the first
bad field), narrow a queryset (`filter_queryset`), and are written into an export's
manifest in a stable text form (`as_text`) so the manifest says exactly what was asked.

Risk level and rule are read from the audit log itself, not from the approvals
tables: a request's classification event (`request.queued`, `request.auto_approved`
or `request.refused`) carries `risk_level` and `rule` in its metadata, so the
filter selects every event of the requests classified that way, and still works
after a request or rule row is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, time
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils.dateparse import parse_date, parse_datetime

from hitl_controlplane.canonical import format_timestamp

from .models import ActorKind, AuditEvent
from .vocabulary import all_verbs

__all__ = ["CLASSIFICATION_VERBS", "RISK_LEVELS", "AuditEventFilterSet", "FilterError"]

CLASSIFICATION_VERBS = ("request.queued", "request.auto_approved", "request.refused")
# The approvals app's RiskLevel values, least to most severe: the audit app imports no
# other app (.importlinter), so they are repeated here, and a test holds them equal.
RISK_LEVELS = ("low", "medium", "high", "critical", "prohibited")


class FilterError(ValueError):
    """A filter value could not be understood; `field` names it, the message says why."""

    code = "invalid_filter"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class MomentField(forms.CharField):
    """An ISO-8601 date-time (naive means UTC) or a date (its midnight, UTC)."""

    def to_python(self, value: Any) -> datetime | None:  # type: ignore[override]  # a CharField that parses
        text = super().to_python(value)
        if not text:
            return None
        try:
            moment = parse_datetime(text)
            if moment is None:
                day = parse_date(text)
                moment = datetime.combine(day, time.min) if day else None
        except ValueError:
            moment = None
        if moment is None:
            raise forms.ValidationError(
                f"{self.label} must be an ISO-8601 date or date-time, e.g. 2026-01-31T09:00:00Z."
            )
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class MomentFilter(django_filters.Filter):
    field_class = MomentField


# The largest id a bigint column holds: a larger filter value is refused before the
# query, which PostgreSQL would fail mid-stream (after an export's headers went out).
BIGINT_MAX = 2**63 - 1


class WholeNumberFilter(django_filters.Filter):
    field_class = forms.IntegerField


class AuditFilterForm(forms.Form):
    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "until must be later than since.")
        return cleaned


def _one_of(name: str, values: Iterable[str]) -> dict[str, str]:
    return {"invalid_choice": f"{name} must be one of {', '.join(values)}."}


class AuditEventFilterSet(django_filters.FilterSet):
    """What to select; an empty value means "no filter on this field".

    `since` is inclusive and `until` exclusive; `actor` matches the actor label
    copied onto each row (a username, an agent name, or a system label) exactly.
    The declaration order is the manifest's.
    """

    since = MomentFilter(field_name="occurred_at", lookup_expr="gte", label="since")
    until = MomentFilter(field_name="occurred_at", lookup_expr="lt", label="until")
    verb = django_filters.ChoiceFilter(
        choices=lambda: [(verb, verb) for verb in all_verbs()],
        error_messages={"invalid_choice": "%(value)r is not a registered audit verb."},
    )
    actor = django_filters.CharFilter(field_name="actor_label")
    actor_kind = django_filters.ChoiceFilter(
        choices=ActorKind.choices, error_messages=_one_of("actor_kind", ActorKind.values)
    )
    agent = WholeNumberFilter(
        field_name="agent_id",
        min_value=0,
        max_value=BIGINT_MAX,
        error_messages={
            "invalid": "agent must be a whole number.",
            "min_value": "agent must be a whole number.",
            "max_value": "agent must be a whole number.",
        },
    )
    request = django_filters.UUIDFilter(
        field_name="request_id", error_messages={"invalid": "request must be a request UUID."}
    )
    risk = django_filters.ChoiceFilter(
        choices=[(level, level) for level in RISK_LEVELS],
        method="classified_as",
        error_messages=_one_of("risk", RISK_LEVELS),
    )
    rule = django_filters.CharFilter(method="classified_as")

    class Meta:
        model = AuditEvent
        fields: list[str] = []
        form = AuditFilterForm

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> AuditEventFilterSet:
        """Validate `query` (a QueryDict, or a dict of strings); raises FilterError."""
        filters = cls({name: str(value) for name, value in query.items()})
        if not filters.is_valid():
            field, messages = next(iter(filters.errors.items()))
            raise FilterError(field, messages[0])
        return filters

    def classified_as(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        """Events of the requests whose classification event has this risk and/or rule:
        both are matched on the same event, in one subquery."""
        wanted = {key: self.form.cleaned_data.get(key) for key in ("risk", "rule")}
        if name == "rule" and wanted["risk"]:
            return queryset  # matched with the risk
        classified = AuditEvent.objects.filter(verb__in=CLASSIFICATION_VERBS, request_id__isnull=False)
        if wanted["risk"]:
            classified = classified.filter(metadata__risk_level=wanted["risk"])
        if wanted["rule"]:
            classified = classified.filter(metadata__rule=wanted["rule"])
        return queryset.filter(request_id__in=classified.values("request_id"))

    def as_text(self) -> dict[str, str]:
        """The filters in use, as strings: the form written into manifests and query strings."""
        if not self.is_valid():
            return {}
        return {
            name: format_timestamp(value) if isinstance(value, datetime) else str(value)
            for name, value in self.form.cleaned_data.items()
            if value is not None and value != ""
        }
