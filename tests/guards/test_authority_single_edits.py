"""Who may decide is policy (issue 22, item 1), as a property: no single edit that applies at
once (rules, destructive verbs, notification settings, memberships, lifecycle, order) lets
anyone new decide anything; and the authority comparison is one pure function over snapshots.
The cast is in tests/guards/authority.py.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from approvals import policy
from approvals.models import ApprovalRequest, PolicyProposal, PolicyVersion
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.permissions import REVIEWERS, RISK_ADMINS
from approvals.policy.membership_gate import propose_membership
from approvals.policy.rules.conditions import RuleValidationError
from approvals.policy.rules.effective_authority import Limits, Snapshot, effective_authority, first_widening
from approvals.policy.tuning import editing

from .authority import CRITICAL_WIRE, SMALL_WIRE, WIRE, approve_code, escalate_everything

pytestmark = pytest.mark.django_db


GROUPS = ("treasury", "oncall", REVIEWERS, RISK_ADMINS)
PEOPLE = ("carol", "erin", "alice", "mallory", "audrey", "ada")
# A critical and a high wire, a call no rule matches, and one a low rule would take but for a destructive verb.
SAMPLES = (("wire_transfer", WIRE), ("wire_transfer", SMALL_WIRE), ("unknown_tool", {}), ("list_transfers", {}))


rule_edits = st.tuples(
    st.just("rule"),
    st.sampled_from(["wire_critical", "wire_high"]),
    st.sampled_from(
        [
            ("risk_level", "high"),
            ("risk_level", "critical"),
            ("risk_level", "medium"),
            ("risk_level", "prohibited"),
            ("required_approvals", 2),
            ("approver_group", "oncall"),
            ("approver_group", REVIEWERS),
            ("escalation_group", "oncall"),
            ("escalation_group", "treasury"),
            ("decision_ttl_seconds", 600),
            ("decision_ttl_seconds", 3),
            ("decision_ttl_seconds", 7200),
            ("execution_window_seconds", 300),
            ("step_up", True),
            ("priority", 1),
            ("priority", 50),
            ("trusts_declared", True),
        ]
    ),
)
verb_edits = st.tuples(st.just("verbs"), st.sampled_from(["add", "remove"]), st.sampled_from(["transfer", "wire"]))
notification_edits = st.tuples(
    st.just("notifications"),
    st.sampled_from(["wire_critical", "wire_high"]),
    st.fixed_dictionaries(
        {
            "escalation_group": st.sampled_from([None, "treasury", "oncall", REVIEWERS, RISK_ADMINS]),
            "escalate_after_seconds": st.sampled_from([None, 1, 60]),
            "max_extension_seconds": st.sampled_from([0, 600]),
            "notify_on_arrival": st.booleans(),
        }
    ),
)
membership_edits = st.tuples(st.just("membership"), st.sampled_from(GROUPS), st.sampled_from(PEOPLE))
lifecycle_edits = st.tuples(
    st.sampled_from(["enable", "disable", "delete"]), st.sampled_from(["wire_critical", "wire_high"]), st.none()
)
reorder_edits = st.tuples(st.just("reorder"), st.none(), st.none())
single_edits = st.one_of(rule_edits, notification_edits, membership_edits, lifecycle_edits, reorder_edits, verb_edits)


def apply_edit(edit, wire_cast) -> bool:
    """Make one edit as ada through the path a person would use; True if it applied at once."""
    kind, target, change = edit
    ada = Person(wire_cast["ada"])
    rules = {rule["name"]: rule for rule in policy.current_policy().compiled.to_dicts()}
    try:
        if kind == "rule":
            field, value = change
            outcome = policy.save_rule({**rules[target], field: value}, actor=ada, note="edit")
        elif kind == "notifications":
            values = {**change, "escalation_group": Group.objects.filter(name=change["escalation_group"]).first()}
            return not isinstance(dispatch.save_settings(target, actor=ada, **values), PolicyProposal)
        elif kind == "membership":
            group, user = Group.objects.get(name=target), wire_cast[change]
            if user.groups.filter(pk=group.pk).exists():
                return True
            if propose_membership(group, [user], acting_user=wire_cast["ada"]) is not None:
                return False
            user.groups.add(group)  # nothing gained: a page may add them at once
            return True
        elif kind == "verbs":
            verbs = list(policy.current_policy().destructive_verbs)
            verbs = [*verbs, change] if target == "add" else [verb for verb in verbs if verb != change]
            outcome = policy.set_destructive_verbs(list(dict.fromkeys(verbs)), actor=ada, note="verbs")
        elif kind in ("enable", "disable"):
            outcome = editing.set_enabled(target, kind == "enable", actor=ada, note="toggle")
        elif kind == "delete":
            outcome = policy.delete_rule(target, actor=ada, note="gone")
        else:
            outcome = editing.reorder(sorted(rules, reverse=True), actor=ada, note="reorder")
    except RuleValidationError:
        return True  # refused outright: nothing changed (an already-enabled rule, ...)
    return isinstance(outcome, PolicyVersion)


def who_decides(wire_cast) -> dict[int, tuple]:
    """For each sample call: (level, required approvals, the people approve() lets decide,
    before and after every due escalation)."""
    seen = {}
    for index, (action_type, params) in enumerate(SAMPLES):
        request = wire_cast["submit"](action_type, params)
        if request.state != "pending_approval":
            seen[index] = (request.risk_level, request.required_approvals, frozenset())
            continue
        deciders = {name for name in PEOPLE if approve_code(request.pk, wire_cast[name]) in ("approved", "voted")}
        seen[index] = (request.risk_level, request.required_approvals, deciders)
    escalate_everything()
    for index, (action_type, params) in enumerate(SAMPLES):
        request = ApprovalRequest.objects.filter(action_type=action_type).order_by("-created_at")
        request = [r for r in request if r.current_params() == params][0]
        if request.state == "pending_approval":
            level, quorum, deciders = seen[index]
            later = {
                name
                for name in PEOPLE
                if name not in deciders and approve_code(request.pk, wire_cast[name]) in ("approved", "voted")
            }
            seen[index] = (level, quorum, frozenset(deciders | later))
    return seen


def _rank(level):
    from approvals.policy.rules.levels import level_rank

    return level_rank(level)


@pytest.fixture
def baseline(wire_cast_four_eyes, submit):
    cast = {**wire_cast_four_eyes, "submit": submit}
    with transaction.atomic():
        seen = who_decides(cast)
        transaction.set_rollback(True)
    return cast, seen


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edit=single_edits)
def test_no_single_edit_that_applies_at_once_lets_anyone_new_decide(baseline, edit):
    cast, before = baseline
    with transaction.atomic():
        if apply_edit(edit, cast):
            after = who_decides(cast)
            for index, (level, quorum, deciders) in after.items():
                old_level, old_quorum, old_deciders = before[index]
                assert _rank(level) >= _rank(old_level), (edit, SAMPLES[index])
                if level == old_level and level not in ("low", "prohibited"):
                    assert quorum >= old_quorum, (edit, SAMPLES[index])
                assert deciders <= old_deciders, (edit, SAMPLES[index], deciders - old_deciders)
                assert "audrey" not in deciders
        transaction.set_rollback(True)


def test_the_authority_comparison_is_one_pure_function_over_snapshots():
    rules = ({**CRITICAL_WIRE, "enabled": True, "step_up": False, "escalation_group": None},)
    before = Snapshot(
        rules=rules,
        verbs=frozenset(),
        members={"treasury": frozenset({1}), RISK_ADMINS: frozenset({7})},
        default={"risk_level": "medium", "approver_group": REVIEWERS},
    )
    assert first_widening(before, before) is None
    assert effective_authority(before)["wire_critical"].deciders == {1}
    widened = Snapshot(
        rules=rules,
        verbs=frozenset(),
        members=before.members,
        notifications={"wire_critical": {"escalation_group": RISK_ADMINS, "escalate_after_seconds": 1}},
        default=before.default,
    )
    assert first_widening(before, widened) == (
        "escalating wire_critical to 1 person who could not decide it needs a second risk-admin"
    )
    assert first_widening(widened, before) is None  # turning it off narrows
    joined = Snapshot(
        rules=rules,
        verbs=frozenset(),
        members={**before.members, "treasury": frozenset({1, 2})},
        default=before.default,
    )
    assert first_widening(before, joined) == "giving 1 person decide on wire_critical needs a second risk-admin"
    assert first_widening(before, before, Limits(max_shortened_rules=0)) is None
