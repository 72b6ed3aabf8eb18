"""Four eyes on policy (issue 12, attack 5): a policy change takes effect only when a
second risk-admin approves it, unless it is provably stricter.

ada and ben are risk-admins; carol approves wires for treasury; alice reviews.
"""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from approvals import policy
from approvals.models import PolicyProposal, PolicyVersion, RiskRule
from approvals.people import Person
from approvals.policy import PolicyError
from approvals.policy.rules.conditions import RuleValidationError
from approvals.policy.tuning import editing
from audit.chain import verify_chain
from audit.models import AuditEvent

from .conftest import WIRE_TRANSFER

pytestmark = pytest.mark.django_db

BIG_WIRE = {"amount": 250_000, "to": "acct-123", "memo": "supplier"}


def events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb=verb).order_by("seq"))


def rules_now() -> list[tuple]:
    return list(
        RiskRule.objects.order_by("name").values_list(
            "name", "priority", "enabled", "risk_level", "required_approvals", "approver_group__name", "action_type"
        )
    )


# --- Attack 5 ----------------------------------------------------------------------------------------


def test_attack_5_a_risk_admin_routing_a_rule_to_their_own_group_waits_for_a_second_one(
    risk_admin, ben, people, wire_rule, four_eyes, submit
):
    ada = risk_admin
    ada_desk = Group.objects.create(name="ada-desk")
    ada.groups.add(ada_desk)
    versions_before = PolicyVersion.objects.count()

    outcome = policy.save_rule(
        {**WIRE_TRANSFER, "approver_group": "ada-desk"}, actor=Person(ada), note="Route wires to my desk"
    )

    # The change waits, and says why.
    assert isinstance(outcome, PolicyProposal) and outcome.status == PolicyProposal.Status.PENDING
    assert PolicyVersion.objects.count() == versions_before
    assert RiskRule.objects.get(name="wire_transfer").approver_group.name == "treasury"
    proposed = events("policy.proposed")[-1]
    assert proposed.actor_label == "ada" and proposed.metadata["note"] == "Route wires to my desk"
    assert proposed.metadata["diff"]["changed"]["wire_transfer"]["approver_group"] == ["treasury", "ada-desk"]
    assert proposed.metadata["waits_because"] == (
        "changing the approver group of wire_transfer needs a second risk-admin"
    )

    # ada cannot approve it herself, however she asks.
    with pytest.raises(PolicyError) as refused:
        policy.approve_proposal(outcome.pk, actor=Person(ada))
    assert refused.value.code == "four_eyes_same_person"
    assert PolicyProposal.objects.get(pk=outcome.pk).status == PolicyProposal.Status.PENDING

    # Meanwhile wires are still classified to treasury.
    waiting = submit("wire_transfer", BIG_WIRE)
    assert waiting.classification["approver_group"] == "treasury"

    # ben approves: it applies, and the version names both.
    version = policy.approve_proposal(outcome.pk, actor=Person(ben), note="Checked with ada's manager")
    assert (version.created_by, version.approved_by) == (ada, ben)
    assert (version.created_by_label, version.approved_by_label) == ("ada", "ben")
    assert version.note == "Route wires to my desk"
    assert RiskRule.objects.get(name="wire_transfer").approver_group.name == "ada-desk"
    assert submit("wire_transfer", BIG_WIRE).classification["approver_group"] == "ada-desk"
    proposal = PolicyProposal.objects.get(pk=outcome.pk)
    assert (proposal.status, proposal.applied_version, proposal.decided_by) == ("applied", version, ben)

    approved = events("policy.proposal_approved")[-1]
    assert approved.actor_label == "ben" and approved.metadata["proposal"] == outcome.pk
    changed = events("policy.changed")[-1]
    assert changed.actor_label == "ben"
    assert (changed.metadata["created_by"], changed.metadata["approved_by"], changed.metadata["applied"]) == (
        "ada",
        "ben",
        "approved",
    )
    assert verify_chain().ok


# --- What applies at once, what waits ----------------------------------------------------------------

STRICTER_EDITS = {
    "raising the level": {"risk_level": "critical"},
    "raising required approvals": {"required_approvals": 2},
    "masking a param": {"masked_params": ["memo"]},
    "removing an editable param": {"editable_params": ["memo"]},
    "shortening the decision deadline": {"decision_ttl_seconds": 600},
    "shortening the execution window": {"execution_window_seconds": 300},  # not below the 300 s floor
    "turning step-up on": {"step_up": True},
}


@pytest.mark.parametrize("edit", STRICTER_EDITS.values(), ids=STRICTER_EDITS.keys())
def test_a_stricter_rule_edit_applies_at_once(risk_admin, wire_rule, four_eyes, edit):
    outcome = policy.save_rule({**WIRE_TRANSFER, **edit}, actor=Person(risk_admin), note="Tighten wires")
    assert isinstance(outcome, PolicyVersion) and outcome.approved_by is None
    assert policy.current_policy().version_id == outcome.pk
    stored = policy.rule_to_spec(RiskRule.objects.get(name="wire_transfer")).to_dict()
    assert {key: stored[key] for key in edit} == edit
    assert events("policy.changed")[-1].metadata["applied"] == "stricter_only"
    assert not PolicyProposal.objects.exists()


def test_adding_a_prohibited_rule_or_a_verb_applies_at_once(risk_admin, four_eyes):
    shred = {"name": "shred_prohibited", "priority": 1, "action_type": "shred_*", "risk_level": "prohibited"}
    assert isinstance(policy.save_rule(shred, actor=Person(risk_admin), note="Never shred"), PolicyVersion)
    verbs = [*policy.current_policy().destructive_verbs, "Shred"]
    version = policy.set_destructive_verbs(verbs, actor=Person(risk_admin), note="Shredding destroys")
    assert isinstance(version, PolicyVersion)
    assert version.destructive_verbs[-1] == "shred"  # case-folded
    assert version.diff["destructive_verbs"] == {"added": ["shred"], "removed": []}
    assert policy.current_policy().destructive_verbs[-1] == "shred"


WAITING_CHANGES = {
    "a new low rule above all": lambda ada: policy.save_rule(
        {"name": "all_low", "priority": 0, "action_type": "*", "risk_level": "low"}, actor=Person(ada), note="x"
    ),
    "a new medium rule": lambda ada: policy.save_rule(
        {"name": "wire_medium", "priority": 1, "action_type": "wire_*", "risk_level": "medium"},
        actor=Person(ada),
        note="x",
    ),
    "reordering": lambda ada: editing.reorder(
        list(reversed([r["name"] for r in policy.current_policy().compiled.to_dicts()])), actor=Person(ada), note="x"
    ),
    "disabling a rule": lambda ada: editing.set_enabled("wire_transfer", False, actor=Person(ada), note="x"),
    "deleting a rule": lambda ada: policy.delete_rule("wire_transfer", actor=Person(ada), note="x"),
    "editing the pattern": lambda ada: policy.save_rule(
        {**WIRE_TRANSFER, "action_type": "wire_*"}, actor=Person(ada), note="x"
    ),
    "editing a condition": lambda ada: policy.save_rule(
        {**WIRE_TRANSFER, "conditions": [{"path": "params.amount", "op": "gt", "value": 10**6}]},
        actor=Person(ada),
        note="x",
    ),
    "trusting declared.*": lambda ada: policy.save_rule(
        {**WIRE_TRANSFER, "trusts_declared": True}, actor=Person(ada), note="x"
    ),
    "lowering the level": lambda ada: policy.save_rule(
        {**WIRE_TRANSFER, "risk_level": "medium"}, actor=Person(ada), note="x"
    ),
    "removing a destructive verb": lambda ada: policy.set_destructive_verbs(
        [v for v in policy.current_policy().destructive_verbs if v != "transfer"], actor=Person(ada), note="x"
    ),
    "rolling back to the seed policy": lambda ada: policy.restore_version(1, actor=Person(ada), note="x"),
}


@pytest.mark.parametrize("change", WAITING_CHANGES.values(), ids=WAITING_CHANGES.keys())
def test_any_other_change_waits_and_changes_nothing(risk_admin, wire_rule, four_eyes, change):
    rules, current = rules_now(), policy.current_policy()
    outcome = change(risk_admin)
    assert isinstance(outcome, PolicyProposal) and outcome.status == "pending"
    assert outcome.base_version_id == current.version_id
    assert rules_now() == rules and policy.current_policy() is current
    assert events("policy.proposed")[-1].metadata["proposal"] == outcome.pk
    assert outcome.dry_run["summary"]


def test_a_rollback_proposal_remembers_what_it_restores(risk_admin, ben, wire_rule, four_eyes):
    proposal = policy.restore_version(1, actor=Person(risk_admin), note="Back to the seed policy")
    assert proposal.restored_from == 1
    version = policy.approve_proposal(proposal.pk, actor=Person(ben))
    assert version.rules == PolicyVersion.objects.get(number=1).rules
    assert events("policy.changed")[-1].metadata["restored_from"] == 1


def test_with_four_eyes_off_everything_applies_at_once_and_says_so(risk_admin, wire_rule):
    outcome = policy.save_rule({**WIRE_TRANSFER, "risk_level": "low"}, actor=Person(risk_admin), note="Demo")
    assert isinstance(outcome, PolicyVersion)
    assert events("policy.changed")[-1].metadata["applied"] == "four_eyes_off"


# --- Deciding proposals --------------------------------------------------------------------------------


def test_a_proposal_made_against_an_older_version_is_stale_and_applies_nothing(risk_admin, ben, wire_rule, four_eyes):
    proposal = policy.save_rule(
        {**WIRE_TRANSFER, "approver_group": "reviewers"}, actor=Person(risk_admin), note="Reviewers can do wires"
    )
    newer = policy.save_rule({**WIRE_TRANSFER, "required_approvals": 2}, actor=Person(ben), note="Two for wires")
    assert isinstance(newer, PolicyVersion)

    with pytest.raises(PolicyError) as refused:
        policy.approve_proposal(proposal.pk, actor=Person(ben))

    assert refused.value.code == "proposal_stale"
    assert PolicyProposal.objects.get(pk=proposal.pk).status == PolicyProposal.Status.STALE  # persisted
    assert policy.current_policy().version_id == newer.pk
    assert RiskRule.objects.get(name="wire_transfer").approver_group.name == "treasury"
    assert events("policy.proposal_rejected")[-1].metadata["outcome"] == "stale"
    with pytest.raises(PolicyError) as again:
        policy.approve_proposal(proposal.pk, actor=Person(ben))
    assert again.value.code == "proposal_not_pending"


def test_another_risk_admin_rejects_with_a_reason_and_the_author_withdraws(risk_admin, ben, wire_rule, four_eyes):
    first = policy.delete_rule("wire_transfer", actor=Person(risk_admin), note="Wires are rare")
    with pytest.raises(RuleValidationError) as no_reason:
        policy.reject_proposal(first.pk, actor=Person(ben), note=" ")
    assert no_reason.value.field == "note"

    rejected = policy.reject_proposal(first.pk, actor=Person(ben), note="They are not rare")
    assert (rejected.status, rejected.decided_by_label, rejected.decision_note) == (
        "rejected",
        "ben",
        "They are not rare",
    )
    with pytest.raises(PolicyError) as late:
        policy.approve_proposal(first.pk, actor=Person(ben))
    assert late.value.code == "proposal_not_pending"

    second = editing.set_enabled("wire_transfer", False, actor=Person(risk_admin), note="Pause wires")
    withdrawn = policy.reject_proposal(second.pk, actor=Person(risk_admin), note="")
    assert withdrawn.status == "withdrawn"
    assert [e.metadata["outcome"] for e in events("policy.proposal_rejected")] == ["rejected", "withdrawn"]
    assert RiskRule.objects.get(name="wire_transfer").enabled
    assert verify_chain().ok


def test_only_risk_admins_change_or_decide_policy(risk_admin, people, wire_rule, four_eyes):
    alice = people["alice"]  # a reviewer
    proposal = policy.save_rule({**WIRE_TRANSFER, "risk_level": "medium"}, actor=Person(risk_admin), note="x")
    for attempt in (
        lambda: policy.save_rule(WIRE_TRANSFER, actor=Person(alice), note="x"),
        lambda: policy.propose_change([], [], actor=Person(alice), note="x"),
        lambda: policy.set_destructive_verbs([], actor=Person(alice), note="x"),
        lambda: policy.approve_proposal(proposal.pk, actor=Person(alice)),
        lambda: policy.reject_proposal(proposal.pk, actor=Person(alice), note="x"),
        lambda: editing.reorder(["wire_transfer"], actor=Person(alice), note="x"),
        # The system may only seed an empty policy: no side door without a person.
        lambda: policy.propose_change([], [], actor=None, note="x"),
    ):
        with pytest.raises(PolicyError) as refused:
            attempt()
        assert (refused.value.code, refused.value.http_status) == ("not_permitted", 403)
    assert PolicyProposal.objects.get(pk=proposal.pk).status == "pending"


@pytest.mark.parametrize(
    "verbs, field, fragment",
    [
        ("delete", "destructive_verbs", "must be a list"),
        (["delete", "DELETE"], "destructive_verbs[1]", "listed twice"),
        (["delete", "read_and"], "destructive_verbs[1]", "one word"),
        (["", "x"], "destructive_verbs[0]", "one word"),
        (["löschen"], "destructive_verbs[0]", "ASCII"),
        ([" drop"], "destructive_verbs[0]", "one word"),
        ([7], "destructive_verbs[0]", "must be a word"),
        ([f"v{i}" for i in range(201)], "destructive_verbs", "at most 200"),
    ],
)
def test_the_verb_list_is_validated_and_refused_whole(risk_admin, verbs, field, fragment):
    before = policy.current_policy().destructive_verbs
    with pytest.raises(RuleValidationError) as refused:
        policy.set_destructive_verbs(verbs, actor=Person(risk_admin), note="x")
    assert refused.value.field == field and fragment in refused.value.message
    assert policy.current_policy().destructive_verbs == before


def test_the_seed_policy_carries_the_seeded_verbs():
    seeded = PolicyVersion.objects.get(number=1)
    assert "delete" in seeded.destructive_verbs and "shutdown" in seeded.destructive_verbs
    assert seeded.created_by_label == "system" and seeded.approved_by_label == ""


@pytest.mark.django_db(transaction=True)
def test_two_racing_approvals_apply_once(risk_admin, ben, people, wire_rule, four_eyes, require_postgres):
    """ben in two tabs and carol (made a risk-admin) approve at the same moment:
    the proposal row lock and the policy lock let exactly one through."""
    carol = people["carol"]
    carol.groups.add(Group.objects.get(name="risk-admins"))
    proposal = policy.save_rule({**WIRE_TRANSFER, "risk_level": "medium"}, actor=Person(risk_admin), note="x")
    versions = PolicyVersion.objects.count()
    results: list[str] = []
    start = threading.Barrier(3)

    def approve(user) -> None:
        try:
            start.wait()
            policy.approve_proposal(proposal.pk, actor=Person(user))
            results.append("applied")
        except PolicyError as exc:
            results.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(user,)) for user in (ben, ben, carol)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["applied", "proposal_not_pending", "proposal_not_pending"]
    assert PolicyVersion.objects.count() == versions + 1
    assert verify_chain().ok
