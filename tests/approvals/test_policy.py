"""Rules are data: every change is a validated, audited policy version."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from approvals import policy
from approvals.models import PolicyVersion, RiskRule
from approvals.people import Person
from approvals.policy.rules.conditions import RuleValidationError
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

GIFT_CARDS = {
    "name": "gift_cards_high",
    "priority": 15,
    "action_type": "buy_gift_cards",
    "risk_level": "high",
    "conditions": [{"path": "impact.amount", "op": "gte", "value": "100"}],
}


def test_after_migrate_the_standard_groups_and_the_seed_policy_exist():
    assert set(Group.objects.values_list("name", flat=True)) >= {"reviewers", "risk-admins", "auditors"}
    version = PolicyVersion.objects.latest()
    assert {rule["name"] for rule in version.rules} >= {"delete_database_prohibited", "read_low", "update_document"}
    assert Group.objects.get(name="risk-admins").permissions.filter(codename="change_riskrule").exists()


def test_a_rule_change_records_who_when_why_and_the_diff(admin_user):
    before = PolicyVersion.objects.latest()
    policy.save_rule(GIFT_CARDS, actor=Person(admin_user), note="Gift cards are a fraud vector")
    after = PolicyVersion.objects.latest()
    assert after.number == before.number + 1
    assert (after.created_by, after.note) == (admin_user, "Gift cards are a fraud vector")
    assert after.diff == {"added": ["gift_cards_high"], "removed": [], "changed": {}}
    event = AuditEvent.objects.filter(verb="policy.changed").latest("seq")
    assert event.actor_label == "ada" and event.metadata["version"] == after.number

    policy.save_rule({**GIFT_CARDS, "risk_level": "critical"}, actor=Person(admin_user), note="Worse than we thought")
    assert PolicyVersion.objects.latest().diff["changed"] == {"gift_cards_high": {"risk_level": ["high", "critical"]}}


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        ({"conditions": [{"path": "impact.amount", "op": "gtx", "value": 1}]}, "conditions[0].op"),
        ({"conditions": [{"path": "secrets.amount", "op": "gt", "value": 1}]}, "conditions[0].path"),
        ({"conditions": [{"path": "impact.amount", "op": "gt", "value": "lots"}]}, "conditions[0].value"),
        ({"risk_level": "spicy"}, "risk_level"),
        ({"approver_group": "no-such-group"}, "approver_group"),
    ],
)
def test_a_broken_rule_is_refused_whole_and_nothing_changes(admin_user, broken, field):
    rules, versions = RiskRule.objects.count(), PolicyVersion.objects.count()
    with pytest.raises(RuleValidationError) as refused:
        policy.save_rules(
            [{**GIFT_CARDS, "name": "fine_rule"}, {**GIFT_CARDS, **broken}],
            actor=Person(admin_user),
            note="two rules, one broken",
        )
    assert refused.value.field == field
    assert (RiskRule.objects.count(), PolicyVersion.objects.count()) == (rules, versions)


def test_a_change_without_a_note_is_refused(admin_user):
    with pytest.raises(RuleValidationError) as refused:
        policy.save_rule(GIFT_CARDS, actor=Person(admin_user), note="  ")
    assert refused.value.field == "note"
    assert not RiskRule.objects.filter(name="gift_cards_high").exists()


def test_the_policy_compiles_once_per_version(admin_user, django_assert_num_queries):
    first = policy.current_policy()
    with django_assert_num_queries(1):
        assert policy.current_policy() is first
    policy.save_rule(GIFT_CARDS, actor=Person(admin_user), note="new version")
    fresh = policy.current_policy()
    assert fresh is not first and fresh.compiled.version == first.compiled.version + 1


def test_a_request_records_the_version_and_rule_that_classified_it(submit):
    request = submit("update_document", params={"content": "x"})
    assert request.policy_version == PolicyVersion.objects.latest()
    assert request.rule.name == request.rule_name == "update_document"
    assert request.classification["reason"].startswith("rule 'update_document' matched")


class TestAdmin:
    def test_saving_a_rule_in_the_admin_needs_a_note_and_makes_a_version(self, client, django_user_model):
        root = django_user_model.objects.create_superuser("root", password="root-pw-123!")
        client.force_login(root)
        reviewers = Group.objects.get(name="reviewers")
        form = {
            "name": "wire_high",
            "priority": 12,
            "enabled": "on",
            "action_type": "wire_*",
            "conditions": "[]",
            "match": "all",
            "risk_level": "high",
            "required_approvals": 1,
            "approver_group": reviewers.pk,
            "decision_ttl_seconds": 600,
            "execution_window_seconds": 300,
            "editable_params": "[]",
            "masked_params": "[]",
        }
        response = client.post("/admin/approvals/riskrule/add/", form)
        assert response.status_code == 200 and not RiskRule.objects.filter(name="wire_high").exists()
        response = client.post("/admin/approvals/riskrule/add/", {**form, "change_note": "wires need a look"})
        assert response.status_code == 302
        assert PolicyVersion.objects.latest().note == "wires need a look"

    def test_requests_and_audit_rows_are_read_only_in_the_admin(self, client, django_user_model, submit):
        root = django_user_model.objects.create_superuser("root", password="root-pw-123!")
        client.force_login(root)
        request = submit()
        page = client.get(f"/admin/approvals/approvalrequest/{request.pk}/change/")
        assert page.status_code == 200 and b'name="_save"' not in page.content
        assert client.post(f"/admin/approvals/approvalrequest/{request.pk}/delete/").status_code == 403
        assert client.get("/admin/approvals/approvalrequest/add/").status_code == 403
