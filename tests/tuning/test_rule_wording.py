"""Issue 27 item 12: a rule's consequences read as a person would say them."""

from __future__ import annotations

import pytest

from approvals.policy.tuning.dry_run import Transition
from approvals.policy.tuning.proposal_review import describe_field
from approvals.services.step_up import needs_step_up


def test_a_move_between_two_levels_that_both_need_approval_says_so_once():
    sentence = Transition("medium", "high", 3).sentence
    assert sentence == "3 requests would go from medium to high: approval needed either way"
    assert "approval needed today, approval needed" not in sentence


def test_a_move_to_a_step_up_level_says_what_changes(settings):
    settings.STEP_UP_RISK_LEVELS = ["critical"]
    assert Transition("high", "critical", 1).sentence == (
        "1 request would go from high to critical: approval needed today, approval with a step-up proof"
    )


@pytest.mark.parametrize("levels", [["critical"], ["high", "critical"], []])
def test_step_up_to_decide_is_what_the_guard_asks(settings, levels):
    settings.STEP_UP_RISK_LEVELS = levels
    for level in ("low", "medium", "high", "critical"):
        text = describe_field("step_up", {"risk_level": level, "step_up": False})
        assert text.startswith("yes") == needs_step_up(level), (level, text)
    assert describe_field("step_up", {"risk_level": "low", "step_up": True}) == "yes"


def test_a_critical_rule_never_reads_step_up_no(settings):
    settings.STEP_UP_RISK_LEVELS = ["critical"]
    assert describe_field("step_up", {"risk_level": "critical", "step_up": False}) == (
        "yes (every critical request needs it)"
    )


@pytest.mark.django_db
def test_a_proposal_whose_sampled_requests_all_get_stricter_says_why_it_still_waits(
    risk_admin, ben, wire_rule, four_eyes
):
    from django.test import Client
    from django.urls import reverse

    from approvals import policy
    from approvals.people import Person

    from .conftest import WIRE_TRANSFER

    proposal = policy.save_rule({**WIRE_TRANSFER, "approver_group": "reviewers"}, actor=Person(risk_admin), note="n")
    proposal.dry_run = {
        **proposal.dry_run,
        "level_changes": 2,
        "stricter": 2,
        "looser": 0,
        "transitions": [{"stricter": True, "sentence": Transition("medium", "high", 2).sentence}],
    }
    proposal.save(update_fields=["dry_run"])
    client = Client()
    client.force_login(ben)

    body = client.get(reverse("rules:proposal", args=[proposal.pk])).content.decode()

    assert "2 would get a stricter level, 0 a looser one." in body
    assert 'id="stricter-yet-waits"' in body
    assert "only a change that can loosen none applies at once (changing the approver group" in body
