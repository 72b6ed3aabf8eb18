"""The reviewer queue page (`/`) and the reviewer list API (`GET /api/v1/requests/`)
at 1k, 10k and 100k pending requests: time and query count.

Measured in-process through Django's test Client (no HTTP server: the time is the
view, template, middleware and database work, not daphne or the network), with the
query count from a `connection.execute_wrapper` counter (CaptureQueriesContext
reads 0 here after a real submit in the same process). The baseline is `/healthz` measured the same
way in the same run. Requests are cloned in bulk with SQL from one real submission
(same row, its params revision and its group permission rows), so every clone is a
pending card the seed reviewer may decide.

A second person, the seeded auditor (whose group holds none of the requests), reads
the same two pages: the permission filter must stay cheap when it matches nothing,
not only when it matches everything.

Target (DESIGN.md): constant query count, under 100 ms with 100k requests.
"""

from __future__ import annotations

import statistics
import time

from .common import SMOKE, Result, django_setup, emit, fresh_database, manage, progress

SIZES = (100, 300) if SMOKE else (1_000, 10_000, 100_000)
REPEAT = 2 if SMOKE else 7
PAGES = {"queue page": "/", "list API": "/api/v1/requests/"}


def template_request():
    from agents.models import Agent
    from approvals import services
    from approvals.states import Kind, State

    agent = Agent.objects.get(name="bench-agent")
    request = services.submit(
        services.Submission(
            kind=Kind.ACTION,
            action_type="send_email",
            target={"mailbox": "outbox"},
            params={"to": ["someone@example.com"], "subject": "Weekly report"},
        ),
        agent=agent,
    )
    assert request.state == State.PENDING_APPROVAL, request.state
    return request


def clone(template_pk, count: int) -> None:
    """Insert `count` copies of the template request with its revision and permission rows."""
    from django.db import connection

    from approvals.models import ApprovalRequest, ApprovalRequestGroupObjectPermission, ParamsRevision

    def columns(model, replace: dict[str, str]) -> tuple[str, str]:
        names = [f.column for f in model._meta.concrete_fields if f.column != "id" or "id" in replace]
        return ", ".join(names), ", ".join(replace.get(name, f"t.{name}") for name in names)

    req_cols, req_select = columns(
        ApprovalRequest,
        {
            "id": "gen_random_uuid()",
            "idempotency_key": "NULL",
            "created_at": "t.created_at - g * interval '1 millisecond'",
            "decide_by": "t.decide_by + g * interval '1 millisecond'",
        },
    )
    rev_cols, rev_select = columns(ParamsRevision, {"request_id": "new.id"})
    perm_cols, perm_select = columns(ApprovalRequestGroupObjectPermission, {"content_object_id": "new.id"})
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH new AS (
                INSERT INTO {ApprovalRequest._meta.db_table} ({req_cols})
                SELECT {req_select} FROM {ApprovalRequest._meta.db_table} t, generate_series(1, %s) g
                WHERE t.id = %s RETURNING id
            ), revisions AS (
                INSERT INTO {ParamsRevision._meta.db_table} ({rev_cols})
                SELECT {rev_select} FROM new, {ParamsRevision._meta.db_table} t WHERE t.request_id = %s
            )
            INSERT INTO {ApprovalRequestGroupObjectPermission._meta.db_table} ({perm_cols})
            SELECT {perm_select} FROM new, {ApprovalRequestGroupObjectPermission._meta.db_table} t
            WHERE t.content_object_id = %s
        """,
            [count, template_pk, template_pk, template_pk],
        )
        cursor.execute("ANALYZE")


def measure(client, path: str) -> tuple[float, int]:
    """(median ms over REPEAT, query count of one run) for GET path."""
    from django.db import connection

    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    queries: list[str] = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        client.get(path)
    timings = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        client.get(path)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), len(queries)


def main() -> None:
    progress("fresh benchmark database")
    fresh_database()
    manage("seed_demo")
    manage("create_agent", "bench-agent", "-v", "0")
    django_setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from approvals.models import ApprovalRequest

    # No setup_test_environment(): it instruments every template render (a context copy
    # per include) and would triple the page's time; 'testserver' is in ALLOWED_HOSTS.
    template = template_request()
    client = Client()
    client.force_login(get_user_model().objects.get(username="reviewer"))
    outsider = Client()
    outsider.force_login(get_user_model().objects.get(username="auditor"))
    results: list[Result] = []
    first_counts: dict[str, int] = {}
    for size in SIZES:
        have = ApprovalRequest.objects.count()
        progress(f"filling to {size} pending requests")
        clone(template.pk, size - have)
        healthz_ms, _ = measure(client, "/healthz")
        for name, path in PAGES.items():
            ms, queries = measure(client, path)
            first_counts.setdefault(name, queries)
            results.append(
                Result(
                    metric=f"{name}, {size} requests",
                    value=round(ms, 2),
                    unit="ms (in-process)",
                    baseline=round(healthz_ms, 2),
                    baseline_name="/healthz, same way",
                    target="< 100 ms at 100k" if size == SIZES[-1] else "",
                    details={"queries": queries, "requests": size},
                )
            )
            results.append(
                Result(
                    metric=f"{name} queries, {size} requests",
                    value=queries,
                    unit="queries",
                    baseline=first_counts[name],
                    baseline_name=f"queries at {SIZES[0]} requests",
                    target="constant (ratio 1.0)",
                )
            )
            ms, queries = measure(outsider, path)
            results.append(
                Result(
                    metric=f"{name}, {size} requests, none of them granted to the reader",
                    value=round(ms, 2),
                    unit="ms (in-process)",
                    baseline=round(healthz_ms, 2),
                    baseline_name="/healthz, same way",
                    details={"queries": queries, "requests": size},
                )
            )
    emit("queue", results)


if __name__ == "__main__":
    main()
