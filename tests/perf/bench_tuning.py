"""Dry-run and decision metrics at volume: 100k requests replayed, 1M requests
aggregated (`make bench`; `--smoke` uses tiny sizes; `--dry-run-rows` and
`--metrics-rows` override).

    BENCH_DB=cp_bench .venv/bin/python -m tests.perf.bench_tuning

Baselines measured in the same run on the same rows: for the dry-run, fetching the
rows it reads (its one query, without classifying); for metrics, one plain
GROUP BY count over the period. Query counts are reported too: both must stay
constant whatever the number of requests.
"""

from __future__ import annotations

import argparse
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta

from .common import SMOKE, Result, django_setup, emit, fresh_database, progress

CALLS = [
    ("send_email", {"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}, "send_email_default", "medium"),
    (
        "send_email",
        {"to": [f"u{i}@example.com" for i in range(12)], "subject": "News", "body": "All"},
        "send_email_many_recipients_or_sensitive",
        "high",
    ),
    ("read_file", {"path": "/srv/report.txt"}, "read_low", "low"),
    ("update_document", {"content": "v2"}, "update_document", "medium"),
]
PERIOD_SECONDS = 30 * 86_400

# One INSERT ... SELECT over generate_series builds every request in PostgreSQL
# (the Python/ORM loop took ~400 s for 1M rows). Row i: call i % 4 (action type,
# rule, risk level); agent (i / 4) % agents; outcome i % 10 for people's requests
# (0-5 approved and succeeded, 6-7 rejected, 8-9 expired undecided); reviewer
# (i / 10 + outcome) % reviewers; created evenly over 30 days, newest last;
# decision time 30 s to ~17 min, varying with the outcome and i % 13.
_REQUESTS_SQL = """
WITH calls AS (
    SELECT * FROM unnest(%(actions)s::text[], %(rules)s::text[], %(levels)s::text[], %(params)s::jsonb[])
                  WITH ORDINALITY AS c(action_type, rule_name, risk_level, params, n)
), rows AS (
    SELECT g.i, c.action_type, c.rule_name, c.risk_level, c.params,
           c.risk_level <> 'low' AS people, g.i %% 10 AS outcome,
           (%(agents)s::bigint[])[(g.i / 4) %% cardinality(%(agents)s::bigint[]) + 1] AS agent_id,
           (%(reviewers)s::text[])[(g.i / 10 + g.i %% 10) %% cardinality(%(reviewers)s::text[]) + 1] AS reviewer,
           %(now)s::timestamptz - make_interval(secs => ((%(count)s - g.i)::bigint * %(period)s) / %(count)s) AS created
    FROM generate_series(0, %(count)s - 1) AS g(i)
    JOIN calls c ON c.n = g.i %% cardinality(%(actions)s::text[]) + 1
), inserted AS (
    INSERT INTO approvals_approvalrequest ({columns})
    SELECT {values} FROM rows ORDER BY i
    RETURNING id, state, decided_at, decided_by_label, rule_name, created_at, risk_level
), decisions AS (
    -- The people's decisions, for the reviewer table.
    INSERT INTO approvals_decision (request_id, revision, reviewer_id, verdict, feedback, step_up_method, created_at)
    SELECT r.id, 1, u.id, CASE WHEN r.state = 'rejected' THEN 'reject' ELSE 'approve' END, '', '', r.decided_at
    FROM inserted r JOIN auth_user u ON u.username = r.decided_by_label
), revisions AS (
    -- The current params the dry-run replays (only for the rows it reads).
    INSERT INTO approvals_paramsrevision (request_id, number, params, created_at, changed_keys, risk_level)
    SELECT r.id, 1, c.params, r.created_at, '[]'::jsonb, r.risk_level
    FROM inserted r JOIN calls c ON c.rule_name = r.rule_name
    WHERE %(with_params)s
)
SELECT count(*) FROM inserted
"""
_OVERRIDES = {
    # Ordered ids (a random prefix per fill, the row number in the last 12 hex digits): each is
    # appended at the right edge of the primary-key index, where a uuid4 would dirty a random page.
    "id": "(%(id_prefix)s || lpad(to_hex(i), 12, '0'))::uuid",
    "agent_id": "agent_id",
    "action_type": "action_type",
    "rule_name": "rule_name",
    "risk_level": "risk_level",
    "created_at": "created",
    "decide_by": "CASE WHEN people THEN created + interval '1 hour' END",
    "decided_at": "CASE WHEN NOT people OR outcome < 8 "
    "THEN created + make_interval(secs => 30 + outcome * 97 + (i %% 13) * 11) END",
    "decided_by_label": "CASE WHEN NOT people THEN %(policy)s WHEN outcome < 8 THEN reviewer ELSE '' END",
    "state": "CASE WHEN NOT people OR outcome < 6 THEN 'succeeded' WHEN outcome < 8 THEN 'rejected' ELSE 'expired' END",
    "resolution_code": "CASE WHEN NOT people THEN 'auto_approved' WHEN outcome < 6 THEN 'approved' "
    "WHEN outcome < 8 THEN 'rejected' ELSE 'decision_deadline_passed' END",
}


def insert(agents, reviewers, count: int, *, with_params: bool, now) -> None:
    """Insert `count` requests spread over the 30 days before `now`, with mixed rules,
    agents, outcomes and reviewers (and the people's decisions), in SQL. Run it
    inside `bulk_load()`."""
    from django.db import connection

    from approvals.models import DECIDED_BY_POLICY, ApprovalRequest
    from approvals.states import Kind, State

    if count <= 0:
        return
    # Every column not varied above takes the value Django would give a new request,
    # so the fill follows the model without naming its columns.
    template = ApprovalRequest(
        kind=Kind.ACTION,
        agent=agents[0],
        action_type="x",
        target={"mailbox": "x"},
        target_hash="0" * 64,
        state=State.SUCCEEDED,
        created_at=now,
    )
    columns, values, params = [], [], {}
    for field in ApprovalRequest._meta.concrete_fields:
        columns.append(connection.ops.quote_name(field.column))
        if field.column in _OVERRIDES:
            values.append(_OVERRIDES[field.column])
        else:
            params[f"t_{field.column}"] = field.get_db_prep_save(field.pre_save(template, True), connection)
            values.append(f"%(t_{field.column})s")
    from psycopg.types.json import Jsonb

    params.update(
        actions=[call[0] for call in CALLS],
        rules=[call[2] for call in CALLS],
        levels=[call[3] for call in CALLS],
        agents=[agent.pk for agent in agents],
        reviewers=[reviewer.username for reviewer in reviewers],
        now=now,
        count=count,
        period=PERIOD_SECONDS,
        policy=DECIDED_BY_POLICY,
        params=[Jsonb(call[1]) for call in CALLS],
        with_params=with_params,
        id_prefix=uuid.uuid4().hex[:20],
    )
    with connection.cursor() as cursor:
        cursor.execute(_REQUESTS_SQL.format(columns=", ".join(columns), values=", ".join(values)), params)


_FILLED_TABLES = ("approvals_approvalrequest", "approvals_decision", "approvals_paramsrevision")


@contextmanager
def bulk_load():
    """PostgreSQL's bulk-load recipe, in one transaction: build the secondary indexes
    once at the end instead of updating two dozen of them per row, skip the per-row
    foreign-key triggers (every row the fill writes references rows that exist), and
    analyze the tables so the measured queries get the plans real statistics give."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))",
            [list(_FILLED_TABLES)],
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SET LOCAL session_replication_role = replica")
        yield
        cursor.execute("SET LOCAL session_replication_role = origin")
        for _, definition in indexes:
            cursor.execute(definition)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {', '.join(_FILLED_TABLES)}")


def timed(function):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - started
    return result, elapsed, len(queries.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--dry-run-rows", type=int, default=2_000 if SMOKE else 100_000)
    parser.add_argument("--metrics-rows", type=int, default=5_000 if SMOKE else 1_000_000)
    args = parser.parse_args()
    fresh_database()
    django_setup()
    from django.contrib.auth import get_user_model
    from django.db.models import Count
    from django.utils import timezone

    from agents.models import Agent
    from approvals.models import ApprovalRequest
    from approvals.policy.tuning import dry_run, metrics

    User = get_user_model()
    owner = User.objects.create_user("bench-owner")
    reviewers = [User.objects.create_user(f"reviewer{i}") for i in range(5)]
    agents = [Agent.objects.create(name=f"bench-agent-{i}", owner=owner) for i in range(20)]
    now = timezone.now()
    older = max(args.metrics_rows - args.dry_run_rows, 0)
    started = time.perf_counter()
    with bulk_load():
        insert(agents, reviewers, older, with_params=False, now=now - timedelta(days=1))
        insert(agents, reviewers, args.dry_run_rows, with_params=True, now=now)
    progress(f"inserted {older + args.dry_run_rows} requests in {time.perf_counter() - started:.0f} s")

    results = []
    proposal = dry_run.propose_rule(
        {
            "name": "send_email_low",
            "priority": 15,
            "action_type": "send_email",
            "risk_level": "low",
            "conditions": [{"path": "impact.recipient_count", "op": "lte", "value": 3}],
        }
    )
    _, fetch_seconds, _ = timed(lambda: dry_run.recent_requests(args.dry_run_rows))
    report, seconds, queries = timed(lambda: dry_run.dry_run(proposal, limit=args.dry_run_rows))
    results.append(
        Result(
            f"dry-run of {report.sample_size} requests",
            round(seconds, 3),
            "s",
            baseline=round(fetch_seconds, 3),
            baseline_name="fetching the same rows",
            target="bounded queries",
            details={
                "queries": queries,
                "level_changes": report.level_changes,
                "per_request_us": round(seconds / max(report.sample_size, 1) * 1e6, 1),
            },
        )
    )
    progress(f"dry-run {seconds:.2f} s, {queries} queries")

    period = metrics.Period.last_days(31, now=now + timedelta(minutes=1))
    _, baseline, _ = timed(
        lambda: list(
            ApprovalRequest.objects.filter(created_at__gte=period.start, created_at__lt=period.end)
            .order_by()
            .values("rule_name")
            .annotate(n=Count("pk"))
        )
    )
    total = older + args.dry_run_rows
    for name, run in [
        *[(f"metrics by {d}", (lambda d=d: metrics.outcome_table(d, period))) for d in metrics.DIMENSIONS],
        ("metrics by reviewer", lambda: metrics.reviewer_table(period)),
        ("metrics daily series", lambda: metrics.time_series(period)),
    ]:
        rows, seconds, queries = timed(run)
        results.append(
            Result(
                f"{name} over {total} requests",
                round(seconds, 3),
                "s",
                baseline=round(baseline, 3),
                baseline_name="one GROUP BY count",
                target="aggregate queries only",
                details={"queries": queries, "rows": len(rows)},
            )
        )
        progress(f"{name}: {seconds:.2f} s, {queries} queries")
    emit("tuning", results)


if __name__ == "__main__":
    main()
