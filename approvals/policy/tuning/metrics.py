"""Decision metrics over a period: the feedback loop that shows where rules are too
strict (everything approved, quickly) or too loose (failures after approval).

Aggregate queries only: every table is one GROUP BY query plus one query for its
time-to-decision percentiles, whatever the number of requests. Percentiles are
``percentile_cont`` (linear interpolation) on PostgreSQL; elsewhere the same
numbers come from window functions that return at most four rows per group, so
both backends agree (`percentiles`; tests/tuning/test_metrics.py holds them to it).

Definitions (requests created in the period):
- volume: requests; auto-approved share: auto-approved by policy / volume;
- needed people: requests that went to a reviewer queue (they got a ``decide_by``);
  approval, rejection and expiry rates are shares of those (expiry counts a pending
  request past its deadline that the sweeper has not persisted yet);
- post-approval failure rate: failed / approved (by people or by policy);
- time to decision: from submission to the decision, for requests people decided.
Per reviewer (decisions made in the period): decisions, approval rate, and time
from the request's submission to that reviewer's decision.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from hitl_controlplane.manifest import neutralize_cell

from ...models import DECIDED_BY_POLICY, ApprovalRequest, Decision
from ...states import RiskLevel, State
from .percentiles import PERCENTILES, duration_percentiles

__all__ = [
    "DIMENSIONS",
    "PERCENTILES",
    "OutcomeRow",
    "Period",
    "ReviewerRow",
    "SeriesPoint",
    "duration_percentiles",
    "outcome_table",
    "reviewer_table",
    "table_csv",
    "time_series",
]


# The tables: URL key -> (column label, the field grouped by).
DIMENSIONS: dict[str, tuple[str, str]] = {
    "rule": ("Rule", "rule_name"),
    "action_type": ("Action type", "action_type"),
    "agent": ("Agent", "agent__name"),
}


MAX_PERIOD_DAYS = 366
DEFAULT_PERIOD_DAYS = 30


@dataclass(frozen=True)
class Period:
    """[start, end) in UTC. Build with `Period.from_query` from ``from``/``to`` dates."""

    start: datetime
    end: datetime

    @classmethod
    def last_days(cls, days: int = DEFAULT_PERIOD_DAYS, *, now: datetime | None = None) -> Period:
        end = now or timezone.now()
        return cls(end - timedelta(days=days), end)

    @classmethod
    def from_query(cls, query: Mapping[str, str], *, now: datetime | None = None) -> Period:
        """``?from=YYYY-MM-DD&to=YYYY-MM-DD`` (both inclusive); raises ValueError in words."""
        raw_from, raw_to = query.get("from", ""), query.get("to", "")
        if not raw_from and not raw_to:
            return cls.last_days(now=now)
        try:
            first = date.fromisoformat(raw_from) if raw_from else None
            last = date.fromisoformat(raw_to) if raw_to else (now or timezone.now()).date()
        except ValueError:
            raise ValueError("dates must look like 2026-01-31") from None
        first = first or last - timedelta(days=DEFAULT_PERIOD_DAYS - 1)
        if first > last:
            raise ValueError("the period starts after it ends")
        if (last - first).days >= MAX_PERIOD_DAYS:
            raise ValueError(f"a period is at most {MAX_PERIOD_DAYS} days")
        utc = UTC
        return cls(datetime.combine(first, time.min, utc), datetime.combine(last + timedelta(days=1), time.min, utc))

    @property
    def first_day(self) -> date:
        return self.start.date()

    @property
    def last_day(self) -> date:
        return (self.end - timedelta(microseconds=1)).date()


def _by_people() -> Q:
    return ~Q(decided_by_label="") & ~Q(decided_by_label=DECIDED_BY_POLICY)


def _conditions(now: datetime) -> dict[str, Q]:
    approved_states = (State.APPROVED, State.EXECUTING, State.SUCCEEDED, State.FAILED)
    return {
        "auto_approved": Q(decided_by_label=DECIDED_BY_POLICY, risk_level=RiskLevel.LOW),
        "refused": Q(decided_by_label=DECIDED_BY_POLICY, risk_level=RiskLevel.PROHIBITED),
        "needed_people": Q(decide_by__isnull=False),
        "approved": _by_people() & ~Q(state=State.REJECTED),
        "rejected": _by_people() & Q(state=State.REJECTED),
        "expired": Q(decide_by__isnull=False, decided_by_label="")
        & (
            Q(state=State.EXPIRED, resolution_code="decision_deadline_passed")
            | Q(state=State.PENDING_APPROVAL, decide_by__lte=now)
        ),
        # Approved by anyone: a later expiry of the execution window or a failure still counts.
        "approved_total": ~Q(decided_by_label="")
        & ~Q(state=State.REJECTED)
        & (Q(state__in=approved_states) | Q(state__in=(State.EXPIRED, State.CANCELLED))),
        "failed": Q(state=State.FAILED),
    }


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass(frozen=True)
class OutcomeRow:
    key: str
    volume: int
    auto_approved: int
    refused: int
    needed_people: int
    approved: int
    rejected: int
    expired: int
    approved_total: int
    failed: int
    median_seconds: float | None
    p90_seconds: float | None

    @property
    def auto_approved_share(self) -> float | None:
        return _share(self.auto_approved, self.volume)

    @property
    def approval_rate(self) -> float | None:
        return _share(self.approved, self.needed_people)

    @property
    def rejection_rate(self) -> float | None:
        return _share(self.rejected, self.needed_people)

    @property
    def expiry_rate(self) -> float | None:
        return _share(self.expired, self.needed_people)

    @property
    def failure_rate(self) -> float | None:
        return _share(self.failed, self.approved_total)


def _requests_in(period: Period) -> QuerySet[Any]:
    return ApprovalRequest.objects.filter(created_at__gte=period.start, created_at__lt=period.end)


def outcome_table(dimension: str, period: Period, *, now: datetime | None = None) -> list[OutcomeRow]:
    """Outcomes per rule, action type or agent (`DIMENSIONS`), busiest first: two queries."""
    _, key = DIMENSIONS[dimension]
    now = now or timezone.now()
    counts = {name: Count("pk", filter=condition) for name, condition in _conditions(now).items()}
    rows = _requests_in(period).order_by().values(key).annotate(volume=Count("pk"), **counts).order_by("-volume", key)
    times = duration_percentiles(
        _requests_in(period).filter(_by_people()), key=key, end="decided_at", start="created_at"
    )
    table = []
    for row in rows:
        group = row.pop(key)
        percentiles = times.get(group, {})
        table.append(
            OutcomeRow(
                key=group or ("(policy default)" if dimension == "rule" else "(none)"),
                median_seconds=percentiles.get(0.5),
                p90_seconds=percentiles.get(0.9),
                **row,
            )
        )
    return table


@dataclass(frozen=True)
class ReviewerRow:
    key: str
    decisions: int
    approvals: int
    rejections: int
    median_seconds: float | None
    p90_seconds: float | None

    @property
    def approval_rate(self) -> float | None:
        return _share(self.approvals, self.decisions)


def reviewer_table(period: Period) -> list[ReviewerRow]:
    """Each reviewer's decisions made in the period: two queries."""
    decisions = Decision.objects.filter(created_at__gte=period.start, created_at__lt=period.end)
    key = "reviewer__username"
    rows = (
        decisions.order_by()
        .values(key)
        .annotate(
            decisions=Count("pk"),
            approvals=Count("pk", filter=Q(verdict=Decision.Verdict.APPROVE)),
            rejections=Count("pk", filter=Q(verdict=Decision.Verdict.REJECT)),
        )
        .order_by("-decisions", key)
    )
    times = duration_percentiles(decisions, key=key, end="created_at", start="request__created_at")
    table = []
    for row in rows:
        reviewer = row.pop(key)
        percentiles = times.get(reviewer, {})
        table.append(
            ReviewerRow(key=reviewer, median_seconds=percentiles.get(0.5), p90_seconds=percentiles.get(0.9), **row)
        )
    return table


@dataclass(frozen=True)
class SeriesPoint:
    day: date
    volume: int
    auto_approved: int
    needed_people: int
    approved: int
    rejected: int
    expired: int


def time_series(period: Period, *, now: datetime | None = None) -> list[SeriesPoint]:
    """Daily counts over the period, one point per day (days without requests are zero): one query."""
    conditions = _conditions(now or timezone.now())
    names = ("auto_approved", "needed_people", "approved", "rejected", "expired")
    rows = (
        _requests_in(period)
        .order_by()
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(volume=Count("pk"), **{name: Count("pk", filter=conditions[name]) for name in names})
    )
    by_day = {row["day"]: row for row in rows}
    points = []
    day = period.first_day
    while day <= period.last_day:
        row = by_day.get(day, {})
        points.append(SeriesPoint(day=day, volume=row.get("volume", 0), **{name: row.get(name, 0) for name in names}))
        day += timedelta(days=1)
    return points


def _cell(value: Any) -> Any:
    # The project's one CSV cell guard (also the audit export's): names come from agents and admins.
    if value is None:
        return ""
    return neutralize_cell(value) if isinstance(value, str) else value


def table_csv(table: str, period: Period) -> str:
    """One table as CSV text: `table` is a DIMENSIONS key, "reviewer" or "daily".
    Raises KeyError for an unknown table."""
    if table == "reviewer":
        rows: Iterable[Any] = reviewer_table(period)
        header = [
            "reviewer",
            "decisions",
            "approvals",
            "rejections",
            "approval_rate",
            "median_seconds_to_decide",
            "p90_seconds_to_decide",
        ]
        lines = [
            [r.key, r.decisions, r.approvals, r.rejections, r.approval_rate, r.median_seconds, r.p90_seconds]
            for r in rows
        ]
    elif table == "daily":
        header = [f.name for f in fields(SeriesPoint)]
        lines = [[getattr(p, name) for name in header] for p in time_series(period)]
    else:
        label, _ = DIMENSIONS[table]
        header = [
            table,
            "volume",
            "auto_approved_share",
            "needed_people",
            "approval_rate",
            "rejection_rate",
            "expiry_rate",
            "post_approval_failure_rate",
            "median_seconds_to_decision",
            "p90_seconds_to_decision",
        ]
        lines = [
            [
                r.key,
                r.volume,
                r.auto_approved_share,
                r.needed_people,
                r.approval_rate,
                r.rejection_rate,
                r.expiry_rate,
                r.failure_rate,
                r.median_seconds,
                r.p90_seconds,
            ]
            for r in outcome_table(table, period)
        ]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for line in lines:
        writer.writerow([_cell(value) for value in line])
    return out.getvalue()
