"""Decision metrics for risk-admins at /rules/metrics/: tables, charts and CSV."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from controlplane.http.codes import register

from ..policy.tuning import charts, metrics
from .rules_http import json_error, risk_admin_required

INVALID_PERIOD = register("invalid_period", 400, "The metrics period (from/to) is not a valid range of days.")


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@risk_admin_required
@require_GET
def metrics_page(request: HttpRequest) -> HttpResponse:
    try:
        period = metrics.Period.from_query(request.GET)
    except ValueError as exc:
        messages.error(request, f"Showing the last {metrics.DEFAULT_PERIOD_DAYS} days: {exc}.")
        period = metrics.Period.last_days()
    tables = {key: metrics.outcome_table(key, period) for key in metrics.DIMENSIONS}
    reviewers = metrics.reviewer_table(period)
    series = metrics.time_series(period)
    days = [point.day.strftime("%m-%d") for point in series]
    timeline = charts.line_chart(
        days,
        [
            charts.Series("Requests", [p.volume for p in series], "s-volume"),
            charts.Series("Needed people", [p.needed_people for p in series], "s-people"),
            charts.Series("Auto-approved", [p.auto_approved for p in series], "s-auto"),
            charts.Series("Rejected", [p.rejected for p in series], "s-rejected"),
        ],
        title="Requests per day",
    )
    approval_bars = charts.bar_chart(
        [charts.Bar(row.key, row.approval_rate, _pct(row.approval_rate)) for row in tables["rule"][:15]],
        title="Approval rate by rule (of requests that needed people)",
        maximum=1.0,
    )
    reviewer_bars = charts.bar_chart(
        [charts.Bar(row.key, row.median_seconds, _duration(row.median_seconds)) for row in reviewers[:15]],
        title="Median time to decide by reviewer",
        css_class="bar-b",
    )
    return render(
        request,
        "rules/metrics.html",
        {
            "period": period,
            "tables": [(key, metrics.DIMENSIONS[key][0], rows) for key, rows in tables.items()],
            "reviewers": reviewers,
            "timeline": timeline,
            "approval_bars": approval_bars,
            "reviewer_bars": reviewer_bars,
            "query": f"from={period.first_day.isoformat()}&to={period.last_day.isoformat()}",
        },
    )


@risk_admin_required
@require_GET
def metrics_csv(request: HttpRequest, table: str) -> HttpResponse:
    if table not in (*metrics.DIMENSIONS, "reviewer", "daily"):
        raise Http404("No such table.")
    try:
        period = metrics.Period.from_query(request.GET)
    except ValueError as exc:
        return json_error(INVALID_PERIOD, str(exc))
    response = HttpResponse(metrics.table_csv(table, period), content_type="text/csv; charset=utf-8")
    filename = f"decision-metrics-{table}-{period.first_day.isoformat()}-{period.last_day.isoformat()}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
