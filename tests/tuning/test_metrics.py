"""Decision metrics: outcome rates and time to decision per rule, action type, agent
and reviewer, from aggregate queries only, equal on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.models import DECIDED_BY_POLICY, ApprovalRequest, Decision
from approvals.policy.tuning import metrics
from approvals.policy.tuning.metrics import Period
from approvals.states import State
from tests.tuning.conftest import rolled_back

pytestmark = pytest.mark.django_db

EMAIL = ("send_email", {"to": ["dana@example.com"], "subject": "s", "body": "b"})


def reference_percentile(values: list[float], fraction: float) -> float:
    """percentile_cont as PostgreSQL defines it: linear interpolation between ranks."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


@pytest.fixture
def metrics_story(make_requests, people):
    """A week of mail-bot's requests with known outcomes (times from `base`)."""
    now = timezone.now()
    base = now - timedelta(days=2)
    people_decided = make_requests(
        [EMAIL] * 3,
        start=base,
        rule_name="send_email_default",
        risk_level="medium",
        decide_by=now + timedelta(hours=1),
        decided_by_label="alice",
        state=lambda i: [State.SUCCEEDED, State.FAILED, State.REJECTED][i],
        decided_at=lambda i: base + timedelta(seconds=i) + timedelta(seconds=[60, 120, 300][i]),
    )
    make_requests(
        [EMAIL],
        start=base,
        rule_name="send_email_default",
        risk_level="medium",
        decide_by=base + timedelta(hours=1),
        state=State.EXPIRED,
        resolution_code="decision_deadline_passed",
    )
    # Past its deadline, not yet swept: reads as expired.
    make_requests(
        [EMAIL],
        start=base,
        rule_name="send_email_default",
        risk_level="medium",
        decide_by=now - timedelta(minutes=1),
        state=State.PENDING_APPROVAL,
    )
    make_requests(
        [("read_file", {})] * 3,
        start=base,
        rule_name="read_low",
        risk_level="low",
        decided_by_label=DECIDED_BY_POLICY,
        decided_at=base,
        state=lambda i: State.FAILED if i == 0 else State.SUCCEEDED,
    )
    make_requests(
        [("delete_database", {})],
        start=base,
        rule_name="delete_database_prohibited",
        risk_level="prohibited",
        decided_by_label=DECIDED_BY_POLICY,
        decided_at=base,
        state=State.REJECTED,
    )
    # Outside the period: must not count.
    make_requests([EMAIL] * 5, start=now - timedelta(days=90), rule_name="send_email_default", risk_level="medium")
    for request, verdict in zip(people_decided, ["approve", "approve", "reject"]):
        Decision.objects.create(
            request=request, revision=1, reviewer=people["alice"], verdict=verdict, created_at=request.decided_at
        )
    Decision.objects.create(
        request=people_decided[0],
        revision=1,
        reviewer=people["bob"],
        verdict="approve",
        created_at=people_decided[0].created_at + timedelta(seconds=10),
    )
    return Period.last_days(7, now=now)


def test_outcomes_per_rule(metrics_story):
    rows = {row.key: row for row in metrics.outcome_table("rule", metrics_story)}

    email = rows["send_email_default"]
    assert (email.volume, email.needed_people, email.approved, email.rejected, email.expired) == (5, 5, 2, 1, 2)
    assert email.approval_rate == 0.4 and email.rejection_rate == 0.2 and email.expiry_rate == 0.4
    assert email.auto_approved_share == 0.0
    assert email.failure_rate == 0.5  # one of the two approved failed afterwards
    assert email.median_seconds == 120.0
    assert email.p90_seconds == reference_percentile([60, 120, 300], 0.9) == 264.0

    reads = rows["read_low"]
    assert (reads.volume, reads.auto_approved, reads.needed_people) == (3, 3, 0)
    assert reads.auto_approved_share == 1.0 and reads.approval_rate is None
    assert reads.failure_rate == round(1 / 3, 4)
    assert reads.median_seconds is None  # nobody decided: no time to decision

    assert rows["delete_database_prohibited"].refused == 1


def test_outcomes_per_action_type_and_agent(metrics_story):
    by_type = {row.key: row.volume for row in metrics.outcome_table("action_type", metrics_story)}
    assert by_type == {"send_email": 5, "read_file": 3, "delete_database": 1}
    (agent_row,) = metrics.outcome_table("agent", metrics_story)
    assert agent_row.key == "mail-bot" and agent_row.volume == 9


def test_per_reviewer_decisions_rate_and_time(metrics_story):
    rows = {row.key: row for row in metrics.reviewer_table(metrics_story)}
    assert (rows["alice"].decisions, rows["alice"].approvals, rows["alice"].approval_rate) == (3, 2, round(2 / 3, 4))
    assert rows["alice"].median_seconds == 120.0
    assert (rows["bob"].decisions, rows["bob"].median_seconds, rows["bob"].p90_seconds) == (1, 10.0, 10.0)


def test_daily_series_covers_every_day_of_the_period(metrics_story):
    points = metrics.time_series(metrics_story)
    assert len(points) in (7, 8)  # a rolling window touches 8 calendar days unless it starts at midnight
    assert sum(p.volume for p in points) == 9
    assert sum(p.auto_approved for p in points) == 3
    assert all(p.volume == 0 for p in points[:-3])


def test_csv_of_each_table(metrics_story):
    text = metrics.table_csv("rule", metrics_story)
    header, *lines = text.splitlines()
    assert header.startswith("rule,volume,auto_approved_share")
    assert lines[0].startswith("send_email_default,5,0.0,5,0.4,0.2,0.4,0.5,120.0,264.0")
    assert metrics.table_csv("reviewer", metrics_story).splitlines()[1].startswith("alice,3,2,1,")
    assert len(metrics.table_csv("daily", metrics_story).splitlines()) >= 8
    with pytest.raises(KeyError):
        metrics.table_csv("nope", metrics_story)


def test_spreadsheet_formulas_in_names_are_defused(make_requests):
    make_requests([("=HYPERLINK(1)", {})], start=timezone.now() - timedelta(hours=1))
    assert "\n'=HYPERLINK(1)," in metrics.table_csv("action_type", Period.last_days(1))


def test_periods_from_the_query_string():
    period = Period.from_query({"from": "2026-01-01", "to": "2026-01-31"})
    assert (period.first_day.isoformat(), period.last_day.isoformat()) == ("2026-01-01", "2026-01-31")
    for bad in (
        {"from": "yesterday"},
        {"from": "2026-02-01", "to": "2026-01-01"},
        {"from": "2020-01-01", "to": "2026-01-01"},
    ):
        with pytest.raises(ValueError):
            Period.from_query(bad)


def test_metrics_run_a_bounded_number_of_queries_over_a_thousand_requests(
    make_requests, people, django_assert_max_num_queries
):
    now = timezone.now()
    requests = make_requests(
        [EMAIL] * 1000,
        start=now - timedelta(days=3),
        rule_name=lambda i: f"rule{i % 7}",
        risk_level="medium",
        decide_by=now,
        decided_by_label=lambda i: ["alice", "bob", "", DECIDED_BY_POLICY][i % 4],
        decided_at=lambda i: now - timedelta(days=2, seconds=-i),
        state=State.SUCCEEDED,
    )
    Decision.objects.bulk_create(
        Decision(request=r, revision=1, reviewer=people["alice"], verdict="approve", created_at=now - timedelta(days=1))
        for r in requests[:300]
    )
    period = Period.last_days(7, now=now)
    with django_assert_max_num_queries(2 * 3 + 2 + 1):
        for dimension in metrics.DIMENSIONS:
            assert metrics.outcome_table(dimension, period)
        assert metrics.reviewer_table(period)
        assert metrics.time_series(period)


# --- Percentiles: both methods equal the definition -------------------------------------------

durations = st.dictionaries(
    st.sampled_from(["r1", "r2", "r3"]),
    st.lists(st.integers(0, 10**9).map(lambda us: us / 10**6 * 37), min_size=1, max_size=9),
    min_size=1,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=durations)
def test_time_to_decision_percentiles_equal_percentile_cont_on_every_backend(make_requests, groups):
    with rolled_back():
        start = timezone.now() - timedelta(days=1)
        for rule, seconds in groups.items():
            make_requests(
                [EMAIL] * len(seconds),
                start=start,
                rule_name=rule,
                decided_by_label="alice",
                created_at=start,
                decided_at=lambda i, s=seconds: start + timedelta(seconds=s[i]),
            )
        queryset = ApprovalRequest.objects.all()
        methods = ["window", "percentile_cont"] if connection.vendor == "postgresql" else ["window"]
        for method in methods:
            got = metrics.duration_percentiles(
                queryset, key="rule_name", end="decided_at", start="created_at", method=method
            )
            for rule, seconds in groups.items():
                # Stored datetimes keep microseconds; the reference uses the same rounding.
                stored = [round(s, 6) for s in seconds]
                for fraction in metrics.PERCENTILES:
                    assert got[rule][fraction] == pytest.approx(reference_percentile(stored, fraction), abs=1.5e-3)


def test_both_methods_agree_exactly_on_postgresql(require_postgres, metrics_story):
    queryset = ApprovalRequest.objects.exclude(decided_at=None)
    assert metrics.duration_percentiles(
        queryset, key="rule_name", end="decided_at", start="created_at", method="window"
    ) == metrics.duration_percentiles(
        queryset, key="rule_name", end="decided_at", start="created_at", method="percentile_cont"
    )
