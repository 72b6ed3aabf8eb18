"""The one filter over approval requests, shared by the reviewer pages (queue and
history) and the list API (`GET /api/v1/requests/`), as NetBox shares its FilterSets.

Values are validated by the FilterSet's form (a NUL never gets here: the input edge,
controlplane.http.inputs, refuses it first). The API answers an invalid value (an
unknown state or risk) with a 422 naming the field; the pages, whose forms only offer
valid values, show nothing for one (`narrow`).
"""

from __future__ import annotations

from datetime import timedelta

import django_filters
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django_filters.widgets import BooleanWidget

from .models import ApprovalRequest, Decision
from .states import RiskLevel, State

__all__ = ["DECIDED_STATES", "EXPIRING_SOON", "ApprovalRequestFilterSet", "HistoryFilterSet"]

# The "expiring soon" filter, the sidebar's count and the countdown's warning colour share this horizon.
EXPIRING_SOON = timedelta(minutes=15)


class CheckboxOrFlag(BooleanWidget):
    """Links send `expiring=1` (or `true`); a checkbox without a value sends `on`."""

    def value_from_datadict(self, data, files, name):
        value = data.get(name)
        if isinstance(value, str) and value.lower() == "on":
            return True
        return super().value_from_datadict(data, files, name)


class ApprovalRequestFilterSet(django_filters.FilterSet):
    # An agent finds its own requests again after a restart with `?idempotency_key=`
    # or `?run_id=...&tool_call_id=...` (exact matches, from Meta.fields).
    agent = django_filters.CharFilter(field_name="agent__name", label="Agent name")
    batch = django_filters.CharFilter(field_name="batch_id", label="Batch (submitted together)")
    risk = django_filters.ChoiceFilter(field_name="risk_level", choices=RiskLevel.choices, label="Risk level")
    expiring = django_filters.BooleanFilter(
        method="filter_expiring", widget=CheckboxOrFlag, label="Decision deadline within 15 minutes"
    )

    class Meta:
        model = ApprovalRequest
        fields = [
            "state",
            "kind",
            "action_type",
            "run_id",
            "thread_id",
            "resource_id",
            "tool_call_id",
            "idempotency_key",
            "agent",
            "risk",
            "expiring",
            "batch",
        ]

    def __init__(self, data=None, queryset=None, *, now=None, **kwargs) -> None:
        super().__init__(data, queryset, **kwargs)
        self.now = now

    def get_form_class(self):
        # Built once, not per request: no field here depends on the request, and building
        # them was half of this layer's cost on every queue, sync and list call (bench_queue).
        cls = type(self)
        if "_form_class" not in cls.__dict__:
            cls._form_class = super().get_form_class()
        return cls._form_class

    def filter_expiring(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        if not value:
            return queryset
        return queryset.filter(decide_by__lte=(self.now or timezone.now()) + EXPIRING_SOON)

    def narrow(self, requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
        """`requests` under these filters, for the pages: a value no request can hold matches none."""
        if not self.is_valid():
            return requests.none()
        return self.filter_queryset(requests)

    def in_use(self) -> dict[str, str]:
        """The valid filters given, as text by name: what the page shows as selected."""
        if not self.is_bound:
            return {}
        self.form.is_valid()  # cleaned_data then holds the valid ones
        return {name: str(value) for name, value in self.form.cleaned_data.items() if value not in (None, "", False)}


# What a decided request can have ended as: the history page's outcome choices.
DECIDED_STATES = [(state.value, state.label) for state in State if state not in (State.DRAFT, State.PENDING_APPROVAL)]


class HistoryFilterSet(ApprovalRequestFilterSet):
    """The history page's filters: the queue's, and what only a decided request has:
    its outcome, who decided it (the one who closed it, or any approver of a two-person
    approval) and the day it was decided (in the server's time zone)."""

    outcome = django_filters.ChoiceFilter(field_name="state", choices=DECIDED_STATES, label="Outcome")
    decided_by = django_filters.CharFilter(method="filter_decided_by", label="Decided by")
    decided_from = django_filters.DateFilter(field_name="decided_at", lookup_expr="date__gte", label="Decided from")
    decided_to = django_filters.DateFilter(field_name="decided_at", lookup_expr="date__lte", label="Decided until")

    def filter_decided_by(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if not value:
            return queryset
        approved = Decision.objects.filter(
            request=OuterRef("pk"), reviewer__username=value, verdict=Decision.Verdict.APPROVE
        )
        return queryset.filter(Q(decided_by_label=value) | Exists(approved))
