"""Who may decide is policy (issue 22, item 1): a rule change that widens who decides, or lowers
how a request is decided, waits for a second risk-admin, on every path (the rule editor, the
notifications form, the JSON endpoints), and escalation never reaches a group nobody approved.
Deadline floors too: one admin cannot set off an expiry storm. Four eyes is ON here
(tests/conftest.py turns it off elsewhere); the cast is in tests/guards/authority.py.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import override_settings

from approvals import errors, policy, services
from approvals.models import ApprovalRequest, PolicyProposal, PolicyVersion, RiskRule, RuleNotification
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.permissions import AUDITORS, RISK_ADMINS
from approvals.policy import PolicyError
from approvals.policy.rules.conditions import RuleValidationError
from controlplane.accounts.mfa_policy import required_groups

from .authority import (
    CRITICAL_WIRE,
    HIGH_WIRE,
    WIRE,
    approve_code,
    assert_nobody_new_decides,
    escalate_everything,
    events,
)

pytestmark = pytest.mark.django_db


def test_escalating_a_critical_rule_to_risk_admins_waits_and_the_admin_cannot_approve_the_wire_alone(
    wire_cast_four_eyes, submit
):
    cast = wire_cast_four_eyes
    ada, ben, carol = cast["ada"], cast["ben"], cast["carol"]
    risk_admins = Group.objects.get(name=RISK_ADMINS)

    outcome = dispatch.save_settings(
        "wire_critical", actor=Person(ada), escalate_after_seconds=1, escalation_group=risk_admins, note="Faster wires"
    )

    assert isinstance(outcome, PolicyProposal) and outcome.kind == "notifications"
    assert outcome.status == PolicyProposal.Status.PENDING
    assert outcome.waits_because == (
        "escalating wire_critical to 2 people who could not decide it needs a second risk-admin"
    )
    assert not RuleNotification.objects.filter(rule_name="wire_critical").exists()
    assert events("policy.proposed")[-1].metadata["kind"] == "notifications"

    wire = submit("wire_transfer", WIRE)
    assert (wire.risk_level, wire.approver_group.name) == ("critical", "treasury")
    assert escalate_everything() == 0
    assert_nobody_new_decides(wire.pk, ada, ben)
    assert approve_code(wire.pk, carol) == "approved"  # treasury still decides

    # ada cannot approve her own proposal; ben can, and only then does it apply.
    with pytest.raises(PolicyError) as refused:
        policy.approve_proposal(outcome.pk, actor=Person(ada))
    assert refused.value.code == "four_eyes_same_person"
    version = policy.approve_proposal(outcome.pk, actor=Person(ben), note="On-call admins for wires")
    assert (version.created_by, version.approved_by) == (ada, ben)
    assert version.diff["notifications"]["wire_critical"]["escalation_group"] == [None, RISK_ADMINS]
    assert RuleNotification.objects.get(rule_name="wire_critical").escalation_group == risk_admins
    # MFA follows every group that can decide a step-up level: now risk-admins too.
    assert RISK_ADMINS in required_groups()


def test_escalating_to_auditors_is_refused_everywhere_and_no_auditor_decides(wire_cast_four_eyes, submit, client):
    cast = wire_cast_four_eyes
    auditors = Group.objects.get(name=AUDITORS)
    with pytest.raises(ValueError, match="escalation_group: auditors decide nothing"):
        dispatch.save_settings(
            "wire_critical", actor=Person(cast["ada"]), escalate_after_seconds=1, escalation_group=auditors
        )
    client.force_login(cast["ada"])
    answer = client.post(
        "/rules/wire_critical/notifications/",
        {"escalate_after_seconds": "1", "escalation_group": AUDITORS},
        follow=True,
    )
    assert "auditors decide nothing" in answer.content.decode()
    # Nor as a rule's escalation or approver group.
    for field in ("escalation_group", "approver_group"):
        with pytest.raises(RuleValidationError) as refused:
            policy.save_rule({**CRITICAL_WIRE, field: AUDITORS}, actor=Person(cast["ada"]), note="Auditors watch")
        assert refused.value.field == field
    assert not RuleNotification.objects.exists()

    wire = submit("wire_transfer", WIRE)
    assert escalate_everything() == 0
    assert_nobody_new_decides(wire.pk, cast["audrey"])


def test_the_notifications_form_proposes_a_widening_escalation_and_the_second_admin_sees_it(
    wire_cast_four_eyes, submit, client
):
    cast = wire_cast_four_eyes
    client.force_login(cast["ada"])
    answer = client.post(
        "/rules/wire_critical/notifications/",
        {
            "notify_on_arrival": "1",
            "escalate_after_seconds": "1",
            "escalation_group": "oncall",
            "note": "erin covers nights",
        },
    )
    proposal = PolicyProposal.objects.get(kind="notifications")
    assert answer.status_code == 302 and answer["Location"] == f"/rules/proposals/{proposal.pk}/"
    page = client.get(answer["Location"]).content.decode()
    assert "escalating wire_critical to 1 person who could not decide it needs a second risk-admin" in page
    assert "wire_critical: Escalation group: — → &quot;oncall&quot;" in page
    assert not RuleNotification.objects.exists()

    wire = submit("wire_transfer", WIRE)
    assert escalate_everything() == 0
    assert_nobody_new_decides(wire.pk, cast["erin"])

    # The second risk-admin approves it on the page (JSON), and only then erin may decide.
    client.force_login(cast["ben"])
    assert "Notification and escalation settings" in client.get("/rules/").content.decode()
    approved = client.post(f"/rules/proposals/{proposal.pk}/approve/", HTTP_ACCEPT="application/json")
    assert approved.status_code == 200 and approved.json()["ok"]
    number = approved.json()["version"]
    assert client.get("/rules/history/").status_code == 200
    assert client.get(f"/rules/history/{number}/").status_code == 200
    assert escalate_everything() == 1
    assert approve_code(wire.pk, cast["erin"]) == "approved"


def test_the_author_cannot_approve_a_notification_proposal_through_the_json_endpoint(wire_cast_four_eyes, client):
    cast = wire_cast_four_eyes
    proposal = dispatch.save_settings("wire_critical", actor=Person(cast["ada"]), max_extension_seconds=86_400)
    assert proposal.waits_because == (
        "letting reviewers extend the deadline of wire_critical further needs a second risk-admin"
    )
    client.force_login(cast["ada"])
    refused = client.post(f"/rules/proposals/{proposal.pk}/approve/", HTTP_ACCEPT="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "four_eyes_same_person"
    assert not RuleNotification.objects.exists()


def test_informative_and_narrowing_notification_settings_apply_at_once(wire_cast_four_eyes):
    cast = wire_cast_four_eyes
    ada = Person(cast["ada"])
    treasury = Group.objects.get(name="treasury")
    saved = dispatch.save_settings("wire_critical", actor=ada, notify_on_arrival=True, remind_before_seconds=600)
    assert isinstance(saved, RuleNotification)
    # Escalating to the rule's own group hands it to nobody new.
    assert isinstance(
        dispatch.save_settings("wire_critical", actor=ada, escalate_after_seconds=60, escalation_group=treasury),
        RuleNotification,
    )
    # Escalating later, or not at all, narrows.
    assert isinstance(dispatch.save_settings("wire_critical", actor=ada, escalate_after_seconds=600), RuleNotification)
    assert isinstance(
        dispatch.save_settings("wire_critical", actor=ada, escalation_group=None, escalate_after_seconds=None),
        RuleNotification,
    )
    assert not PolicyProposal.objects.exists()
    # Settings for a rule that does not exist would wait for it unseen: refused.
    with pytest.raises(ValueError, match="rule: no rule named 'wire_later'"):
        dispatch.save_settings(
            "wire_later", actor=ada, escalate_after_seconds=1, escalation_group=Group.objects.get(name=RISK_ADMINS)
        )
    # Someone who is not a risk-admin changes nothing, even informative settings.
    with pytest.raises(PolicyError) as refused:
        dispatch.save_settings("wire_critical", actor=Person(cast["alice"]), notify_on_arrival=False)
    assert refused.value.code == errors.NOT_PERMITTED


def test_escalation_itself_refuses_a_group_nobody_approved(wire_cast_four_eyes, submit):
    """Enforced in the core: a caller that names any group gets nothing."""
    cast = wire_cast_four_eyes
    wire = submit("wire_transfer", WIRE)
    for name in (RISK_ADMINS, AUDITORS, "oncall"):
        assert services.escalate_request(wire.pk, group=Group.objects.get(name=name), reason="undecided") is False
    refused = events("request.escalation_refused")
    assert [event.metadata["group"] for event in refused] == [RISK_ADMINS, AUDITORS, "oncall"]
    assert refused[1].metadata["refused_because"] == "auditors decide nothing"
    assert not ApprovalRequest.objects.get(pk=wire.pk).escalated
    assert_nobody_new_decides(wire.pk, cast["ada"], cast["audrey"], cast["erin"])


def test_shortening_a_deadline_below_the_floor_waits_on_every_path(wire_cast_four_eyes, submit, client):
    cast = wire_cast_four_eyes
    ada = Person(cast["ada"])
    outcome = policy.save_rule({**CRITICAL_WIRE, "decision_ttl_seconds": 3}, actor=ada, note="Hurry")
    assert isinstance(outcome, PolicyProposal)
    assert outcome.waits_because == (
        "shortening the decision deadline of wire_critical to 3 s (below 300 s) needs a second risk-admin"
    )

    # The dry-run JSON says so before saving, and the editor's form proposes it.
    client.force_login(cast["ada"])
    dry = client.post(
        "/rules/dry-run.json", {"rule": {**HIGH_WIRE, "execution_window_seconds": 3}}, content_type="application/json"
    ).json()
    assert dry["four_eyes"]["waits_because"] == (
        "shortening the execution window of wire_high to 3 s (below 300 s) needs a second risk-admin"
    )
    answer = client.post(
        "/rules/wire_high/edit/", {"rule_json": json.dumps({**HIGH_WIRE, "decision_ttl_seconds": 3}), "note": "Hurry"}
    )
    assert answer.status_code == 302 and answer["Location"].startswith("/rules/proposals/")
    assert set(RiskRule.objects.values_list("decision_ttl_seconds", "execution_window_seconds")) == {(3600, 900)}
    wire = submit("wire_transfer", WIRE)
    assert wire.decide_by - wire.created_at >= timedelta(seconds=3599)


def test_one_admin_shortens_at_most_three_rules_an_hour_at_once(wire_cast_four_eyes):
    cast = wire_cast_four_eyes
    ada = Person(cast["ada"])
    with override_settings(POLICY_FOUR_EYES=False):
        policy.save_rules(
            [
                {
                    "name": f"r{i}",
                    "priority": 20 + i,
                    "action_type": f"thing_{i}",
                    "risk_level": "high",
                    "decision_ttl_seconds": 3600,
                }
                for i in range(4)
            ],
            actor=ada,
            note="four rules",
        )
    for i in range(3):
        outcome = policy.save_rule(
            {
                "name": f"r{i}",
                "priority": 20 + i,
                "action_type": f"thing_{i}",
                "risk_level": "high",
                "decision_ttl_seconds": 600,
            },
            actor=ada,
            note="tighter",
        )
        assert isinstance(outcome, PolicyVersion), i
    fourth = policy.save_rule(
        {"name": "r3", "priority": 23, "action_type": "thing_3", "risk_level": "high", "decision_ttl_seconds": 600},
        actor=ada,
        note="tighter",
    )
    assert isinstance(fourth, PolicyProposal)
    assert fourth.waits_because == (
        "shortening the deadlines of 4 rules within an hour (more than 3) needs a second risk-admin"
    )
    # Another admin has their own allowance; shortening one already shortened counts once.
    again = policy.save_rule(
        {"name": "r0", "priority": 20, "action_type": "thing_0", "risk_level": "high", "decision_ttl_seconds": 500},
        actor=ada,
        note="tighter still",
    )
    assert isinstance(again, PolicyVersion)
    assert isinstance(
        policy.save_rule(
            {"name": "r3", "priority": 23, "action_type": "thing_3", "risk_level": "high", "decision_ttl_seconds": 600},
            actor=Person(cast["ben"]),
            note="mine",
        ),
        PolicyVersion,
    )
