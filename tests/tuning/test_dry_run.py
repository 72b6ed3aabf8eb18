"""Dry-runs: replay a proposed rule set against recent requests, in bounded queries,
and report exactly what classifying each request one by one would."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.policy.rules.conditions import RuleValidationError
from approvals.policy.rules.engine import CompiledPolicy
from approvals.policy.tuning import dry_run as dr
from tests.rules.strategies import conditions as condition_data
from tests.rules.strategies import namespaces
from tests.tuning.conftest import rolled_back

pytestmark = pytest.mark.django_db

FEW = [{"to": ["dana@example.com"], "subject": "Hi", "body": "Hello"}]
MANY = [{"to": [f"user{i}@example.com" for i in range(12)], "subject": "News", "body": "Hello all"}]


def _low_email_rule(**extra):
    return {
        "name": "send_email_low",
        "priority": 15,
        "action_type": "send_email",
        "risk_level": "low",
        "conditions": [{"path": "impact.recipient_count", "op": "lte", "value": 3}],
        **extra,
    }


def test_loosening_email_reports_the_move_from_medium_to_low_in_words(make_requests, email_is_not_destructive):
    make_requests([("send_email", FEW[0])] * 37 + [("send_email", MANY[0])] * 5 + [("read_file", {})] * 3)

    report = dr.dry_run(dr.propose_rule(_low_email_rule()))

    assert report.sample_size == 45
    assert report.level_changes == 37
    assert [(t.from_level, t.to_level, t.count) for t in report.transitions] == [("medium", "low", 37)]
    assert report.transitions[0].sentence == (
        "37 requests would go from medium to low: approval needed today, auto-executed"
    )
    assert {c.to_rule for c in report.changes} == {"send_email_low"}


def test_a_low_email_rule_changes_nothing_while_send_is_a_destructive_verb(make_requests):
    make_requests([("send_email", FEW[0])] * 3)
    report = dr.dry_run(dr.propose_rule(_low_email_rule()))
    assert report.level_changes == 0


def test_tightening_reads_auto_executed_today_approval_needed(make_requests):
    make_requests([("read_file", {"path": "/etc/motd"})] * 2)
    stricter = {**next(r for r in dr.current_rules() if r["name"] == "read_low"), "risk_level": "high"}

    report = dr.dry_run(dr.propose_rule(stricter))

    assert (
        report.transitions[0].sentence == "2 requests would go from low to high: auto-executed today, approval needed"
    )
    assert report.transitions[0].stricter


def test_the_current_revision_is_replayed_not_an_older_one(make_requests):
    # Revision 0 of every stored request has 50 recipients; revision 1 (current) has one.
    make_requests([("send_email", FEW[0])])
    report = dr.dry_run(dr.current_rules())
    assert report.level_changes == 0 and report.other_changes == 0


def test_same_level_changes_of_rule_or_approvals_are_counted_apart(make_requests):
    make_requests([("send_email", FEW[0])] * 4)
    rule = {**next(r for r in dr.current_rules() if r["name"] == "send_email_default"), "required_approvals": 2}

    report = dr.dry_run(dr.propose_rule(rule))

    assert report.level_changes == 0
    assert report.other_changes == 4
    assert "same level" in report.summary
    assert report.changes[0].to_approvals == 2


def test_deleting_a_rule_sends_its_requests_to_the_default(make_requests):
    make_requests([("read_file", {})] * 3)
    report = dr.dry_run(dr.propose_deletion("read_low"))
    assert [(t.from_level, t.to_level, t.count) for t in report.transitions] == [("low", "medium", 3)]
    assert all(change.to_rule is None for change in report.changes)


def test_only_the_last_n_requests_are_replayed(make_requests):
    make_requests([("read_file", {})] * 10)
    report = dr.dry_run(dr.propose_deletion("read_low"), limit=4)
    assert report.sample_size == 4 and report.level_changes == 4


def test_a_broken_proposal_is_refused_naming_the_field():
    broken = [*dr.current_rules(), {"name": "x", "action_type": "y", "risk_level": "severe"}]
    with pytest.raises(RuleValidationError) as caught:
        dr.dry_run(broken)
    assert caught.value.field.endswith(".risk_level")
    with pytest.raises(ValueError):
        dr.dry_run(dr.current_rules(), limit=0)


def test_dry_run_of_a_thousand_requests_runs_a_bounded_number_of_queries(
    make_requests, email_is_not_destructive, django_assert_max_num_queries
):
    make_requests([("send_email", FEW[0]), ("send_email", MANY[0]), ("read_file", {})] * 334)
    proposal = dr.propose_rule(_low_email_rule())
    with django_assert_max_num_queries(4):
        report = dr.dry_run(proposal, limit=1000)
    assert report.sample_size == 1000
    assert report.level_changes == 334 or report.level_changes == 333


def test_nothing_is_written(make_requests, django_assert_max_num_queries):
    make_requests([("send_email", FEW[0])])
    before = list(ApprovalRequest.objects.values_list("risk_level", "rule_name", "state"))
    dr.dry_run(dr.propose_rule(_low_email_rule()))
    assert list(ApprovalRequest.objects.values_list("risk_level", "rule_name", "state")) == before


# --- The property: the report equals classifying each request one by one ---------------

ACTION_TYPES = ("send_email", "read_file", "transfer_funds", "update_document")
random_rules = st.lists(
    st.fixed_dictionaries(
        {
            "priority": st.integers(0, 50),
            "action_type": st.sampled_from([*ACTION_TYPES, "*", "read_*", "send_?mail", "[rt]*"]),
            "risk_level": st.sampled_from(["low", "medium", "high", "critical", "prohibited"]),
            "enabled": st.booleans(),
            "match": st.sampled_from(["all", "any"]),
            "required_approvals": st.integers(1, 3),
            "conditions": st.lists(condition_data, max_size=3),
        }
    ),
    max_size=6,
).map(lambda rules: [{"name": f"r{i}", **rule} for i, rule in enumerate(rules)])
random_calls = st.lists(st.tuples(st.sampled_from(ACTION_TYPES), namespaces), min_size=1, max_size=12)


def _json_safe(value):
    """What storing through the API leaves of generated params: NaN and infinities
    cannot be JSON, and PostgreSQL's jsonb refuses NUL characters."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    return value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(proposed=random_rules, calls=random_calls, keep_seed=st.booleans())
def test_dry_run_equals_classifying_each_request_one_by_one(make_requests, proposed, calls, keep_seed):
    if keep_seed:  # proposals usually edit the existing set rather than replace it
        proposed = [*dr.current_rules(), *proposed]
    with rolled_back():
        make_requests([(action_type, _json_safe(params)) for action_type, params in calls])
        report = dr.dry_run(proposed, limit=1000)

        current = policy.current_policy().compiled
        candidate = CompiledPolicy.from_dicts(current.version + 1, proposed, policy.policy_defaults())
        expected_pairs: Counter = Counter()
        expected_ids = set()
        for request in ApprovalRequest.objects.all():
            inp = services.classification_input(request, request.current_params())
            before, after = current.classify(inp), candidate.classify(inp)
            if before.risk_level != after.risk_level:
                expected_pairs[(before.risk_level, after.risk_level)] += 1
                expected_ids.add(str(request.pk))

        assert {(t.from_level, t.to_level): t.count for t in report.transitions} == dict(expected_pairs)
        assert {c.request_id for c in report.changes if c.level_changed} == expected_ids
        assert report.level_changes == len(expected_ids)
