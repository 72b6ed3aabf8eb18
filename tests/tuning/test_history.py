"""Policy history: every save is a version (who, when, note, diff); any version can
be rolled back to, which is itself a new, audited version."""

from __future__ import annotations

import pytest

from approvals import policy
from approvals.models import PolicyVersion, RiskRule
from approvals.people import Person
from approvals.policy.rules.conditions import RuleValidationError
from approvals.policy.tuning import history
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

WIRE = {
    "name": "wire_high",
    "priority": 5,
    "action_type": "wire_*",
    "risk_level": "high",
    "conditions": [{"path": "impact.amount", "op": "gt", "value": 1000}],
}


def test_versions_list_who_when_why_and_the_diff_in_words(risk_admin):
    policy.save_rule(WIRE, actor=Person(risk_admin), note="Wires over 1000 need approval")
    newest = history.rows(history.versions()[:1])[0]
    assert newest.created_by == "ada"
    assert newest.note == "Wires over 1000 need approval"
    assert newest.lines == ["added rule wire_high"]

    policy.save_rule({**WIRE, "risk_level": "critical"}, actor=Person(risk_admin), note="Stricter")
    newest = history.rows(history.versions()[:1])[0]
    assert newest.lines == ["wire_high: risk_level high → critical"]


def test_rolling_back_restores_the_rules_as_a_new_audited_version(risk_admin):
    seeded = PolicyVersion.objects.get(number=1)
    policy.save_rule(WIRE, actor=Person(risk_admin), note="Add wires")
    policy.save_rule(
        {**next(r for r in seeded.rules if r["name"] == "read_low"), "risk_level": "high"},
        actor=Person(risk_admin),
        note="Reads need approval",
    )
    policy.delete_rule("list_low", actor=Person(risk_admin), note="Drop list rule")

    restored = history.rollback(1, actor=Person(risk_admin), note="Back to the seed policy")

    assert restored.number == 5
    assert restored.rules == seeded.rules
    assert sorted(RiskRule.objects.values_list("name", flat=True)) == sorted(r["name"] for r in seeded.rules)
    assert policy.current_policy().compiled.to_dicts() == seeded.rules
    event = AuditEvent.objects.filter(verb="policy.changed").order_by("-seq").first()
    assert event.metadata["restored_from"] == 1
    assert event.metadata["version"] == 5
    assert event.metadata["diff"]["added"] == ["list_low"]
    assert event.metadata["diff"]["removed"] == ["wire_high"]
    # before and after of every changed field
    assert event.metadata["diff"]["changed"]["read_low"]["risk_level"] == ["high", "low"]
    assert event.actor_label == "ada"


def test_a_rollback_needs_a_note_and_an_existing_version_and_changes_nothing_otherwise(risk_admin):
    policy.save_rule(WIRE, actor=Person(risk_admin), note="Add wires")
    with pytest.raises(RuleValidationError) as caught:
        history.rollback(1, actor=Person(risk_admin), note="  ")
    assert caught.value.field == "note"
    with pytest.raises(RuleValidationError) as caught:
        history.rollback(99, actor=Person(risk_admin), note="why")
    assert caught.value.field == "version"
    assert PolicyVersion.objects.count() == 2
    assert RiskRule.objects.filter(name="wire_high").exists()


def test_version_detail_says_what_restoring_it_would_change(risk_admin):
    policy.save_rule(WIRE, actor=Person(risk_admin), note="Add wires")
    detail = history.version_detail(1)
    assert not detail.is_current
    assert detail.restore_lines == ["removed rule wire_high"]
    assert history.version_detail(2).is_current
    assert history.version_detail(42) is None
