"""Time-to-decision percentiles per group, in one query: ``percentile_cont`` (linear
interpolation) on PostgreSQL; elsewhere window functions that return at most four rows per
group and interpolate the same way, so both backends agree (tests/tuning/test_metrics.py
holds them to it). `metrics` builds its tables with `duration_percentiles`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import connection
from django.db.models import Aggregate, F, FloatField, Func, QuerySet

__all__ = ["PERCENTILES", "PercentileCont", "Seconds", "duration_percentiles"]

PERCENTILES = (0.5, 0.9)


class Seconds(Func):
    """Seconds from `start` to `end` (two datetime expressions), exact to the microsecond."""

    output_field = FloatField()
    arity = 2

    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:  # type: ignore[override]
        # arguments are (end, start)
        if connection.vendor == "postgresql":
            template = "EXTRACT(EPOCH FROM (%(expressions)s))::float8"
            return super().as_sql(compiler, connection, template=template, arg_joiner=" - ", **extra_context)
        if connection.vendor == "sqlite":
            # Django registers django_timestamp_diff (microseconds) on every SQLite connection.
            template = "(django_timestamp_diff(%(expressions)s) / 1000000.0)"
            return super().as_sql(compiler, connection, template=template, arg_joiner=", ", **extra_context)
        raise NotImplementedError(f"decision metrics support PostgreSQL and SQLite, not {connection.vendor}")


class PercentileCont(Aggregate):
    """PostgreSQL's ordered-set aggregate ``percentile_cont(p) WITHIN GROUP (ORDER BY x)``."""

    function = "percentile_cont"
    output_field = FloatField()
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError("a percentile is between 0 and 1")
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


def _interpolate(values: dict[int, float], n: int, fraction: float) -> float:
    position = fraction * (n - 1)
    low = int(position)
    high = min(low + 1, n - 1)
    if high == low or position == low:
        return values[low]
    return values[low] + (position - low) * (values[high] - values[low])


def _window_percentiles(queryset: QuerySet[Any], key: str, seconds: Func) -> dict[Any, dict[float, float]]:
    """Percentiles per `key` with window functions: at most 4 rows per group come back."""
    inner = queryset.order_by().annotate(_k=F(key), _s=seconds).values("_k", "_s")
    sql, params = inner.query.sql_with_params()
    wanted = []
    for fraction in PERCENTILES:
        tenths = round(fraction * 100)
        # floor and ceil of fraction*(n-1) in integer arithmetic (no math functions in SQLite).
        wanted += [f"(n - 1) * {tenths} / 100", f"((n - 1) * {tenths} + 99) / 100"]
    query = (
        "SELECT k, n, rn, s FROM ("
        " SELECT t._k AS k, t._s AS s,"
        " ROW_NUMBER() OVER (PARTITION BY t._k ORDER BY t._s) - 1 AS rn,"
        " COUNT(*) OVER (PARTITION BY t._k) AS n"
        f" FROM ({sql}) t) w WHERE rn IN ({', '.join(wanted)})"
    )
    picked: dict[Any, dict[int, float]] = defaultdict(dict)
    sizes: dict[Any, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        for k, n, rn, s in cursor.fetchall():
            picked[k][rn] = float(s)
            sizes[k] = n
    return {k: {f: _interpolate(values, sizes[k], f) for f in PERCENTILES} for k, values in picked.items()}


def _percentile_cont(queryset: QuerySet[Any], key: str, seconds: Func) -> dict[Any, dict[float, float]]:
    aggregates = {f"p{round(f * 100)}": PercentileCont(seconds, f) for f in PERCENTILES}
    rows = queryset.values(key).order_by().annotate(**aggregates)
    return {row[key]: {f: row[f"p{round(f * 100)}"] for f in PERCENTILES} for row in rows}


def duration_percentiles(
    queryset: QuerySet[Any], *, key: str, end: str, start: str, method: str | None = None
) -> dict[Any, dict[float, float]]:
    """{key value: {0.5: seconds, 0.9: seconds}} of ``end - start`` per group (one query).

    `method` is "percentile_cont" (PostgreSQL only) or "window"; by default the
    database's best. Values are rounded to the millisecond so both methods agree.
    """
    method = method or ("percentile_cont" if connection.vendor == "postgresql" else "window")
    seconds = Seconds(F(end), F(start))
    run = _percentile_cont if method == "percentile_cont" else _window_percentiles
    return {
        k: {f: round(v, 3) for f, v in values.items()}
        for k, values in run(queryset.filter(**{f"{end}__isnull": False}), key, seconds).items()
    }
