"""Who may decide is policy (issue 22, item 1): four eyes that cannot be talked past.

One risk-admin, alone, must not be able to give anyone (themselves, an auditor, a
stranger) decide on a request, lower how a request is decided, or set off an expiry
storm: not through the rule editor, the notifications form, the JSON endpoints, the
Django admin or a sign-in claim. Each attack ends by trying `services.approve()` as the
people who should not decide, and asserting that they are refused with their code.

The cast: ada and ben are risk-admins; carol approves wires for treasury; erin is on
call; alice reviews; audrey audits; mallory is nobody. Every password is
`<name>-pw-123!`. Four eyes is ON here (tests/conftest.py turns it off elsewhere).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from approvals import errors, policy, services
from approvals.models import ApprovalRequest, PolicyProposal, PolicyVersion, RiskRule, RuleNotification
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.permissions import AUDITORS, REVIEWERS, RISK_ADMINS
from approvals.policy import PolicyError
from approvals.policy.membership import propose_membership
from approvals.policy.rules.authority import Limits, Snapshot, effective_authority, first_widening
from approvals.policy.rules.conditions import RuleValidationError
from approvals.policy.tuning import editing
from audit.models import AuditEvent
from controlplane.accounts import sso
from controlplane.accounts.membership import MembershipActorMiddleware
from controlplane.accounts.mfa_policy import required_groups
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

WIRE = {"amount": 70_000, "to": "acct-9", "memo": "supplier"}
SMALL_WIRE = {"amount": 5_000, "to": "acct-9", "memo": "supplier"}
CRITICAL_WIRE = {
    "name": "wire_critical",
    "priority": 5,
    "action_type": "wire_transfer",
    "risk_level": "critical",
    "required_approvals": 1,
    "approver_group": "treasury",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "conditions": [{"path": "params.amount", "op": "gt", "value": 50_000}],
}
HIGH_WIRE = {
    "name": "wire_high",
    "priority": 10,
    "action_type": "wire_transfer",
    "risk_level": "high",
    "required_approvals": 1,
    "approver_group": "treasury",
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "conditions": [],
}


# --- The cast and the policy ------------------------------------------------------------------------


def _person(name: str, *groups: str, **fields):
    user = get_user_model().objects.create_user(name, password=f"{name}-pw-123!", **fields)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


@pytest.fixture
def wire_cast(people, admin_user):
    """Everyone, by name; the groups exist; the wire rules are in place (set up with four eyes off)."""
    treasury = Group.objects.create(name="treasury")
    Group.objects.create(name="oncall")
    people["carol"].groups.add(treasury)
    everyone = {
        **people,
        "ada": admin_user,
        "ben": _person("ben", RISK_ADMINS, is_staff=True),
        "erin": _person("erin", "oncall"),
        "audrey": _person("audrey", AUDITORS),
    }
    with override_settings(POLICY_FOUR_EYES=False):
        policy.save_rules([CRITICAL_WIRE, HIGH_WIRE], actor=Person(admin_user), note="Wires go to treasury")
    return everyone


@pytest.fixture
def wire_cast_four_eyes(settings, wire_cast):
    settings.POLICY_FOUR_EYES = True
    return wire_cast


def as_person(user) -> Person:
    """`user` deciding with the right password step-up (given whether or not the level needs one)."""
    return Person(user, step_up=services.StepUpProof.password(f"{user.get_username()}-pw-123!"))


class _Undo(Exception):
    pass


def approve_code(request_id, user) -> str:
    """Try approve() as `user`, undone whatever happens: "approved"/"voted", or the refusal's code."""
    outcome = "?"
    try:
        with transaction.atomic():
            try:
                decided = services.approve(request_id, actor=as_person(user), revision=current_revision(request_id))
                outcome = "approved" if decided.state != "pending_approval" else "voted"
            except errors.DomainError as refused:
                outcome = refused.code
            raise _Undo
    except _Undo:
        pass
    return outcome


def assert_nobody_new_decides(request_id, *users) -> None:
    """The last line of every attack: each of `users` is refused decide, with its code."""
    for user in users:
        assert approve_code(request_id, user) == errors.NOT_PERMITTED, user.get_username()


def escalate_everything(seconds: int = 120) -> int:
    return dispatch.escalate_overdue(now=timezone.now() + timedelta(seconds=seconds))


def events(verb: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(verb=verb).order_by("seq"))


# --- Attack: the escalation settings grant decide at once -------------------------------------------


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


# --- Attack: an expiry storm that passes as "stricter" -------------------------------------------


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


# --- Attack: membership of a group that can decide ------------------------------------------------


def _admin_change_form(user, groups) -> dict:
    joined = timezone.localtime(user.date_joined)
    return {
        "username": user.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "groups": [str(group.pk) for group in groups],
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        "initial-date_joined_0": joined.strftime("%Y-%m-%d"),
        "initial-date_joined_1": joined.strftime("%H:%M:%S"),
    }


def test_adding_someone_to_a_deciding_group_in_the_admin_waits_for_a_second_risk_admin(
    wire_cast_four_eyes, submit, client
):
    cast = wire_cast_four_eyes
    root = _person("root", is_staff=True, is_superuser=True)
    mallory, treasury = cast["mallory"], Group.objects.get(name="treasury")
    client.force_login(root)

    answer = client.post(f"/admin/auth/user/{mallory.pk}/change/", _admin_change_form(mallory, [treasury]), follow=True)

    assert answer.status_code == 200
    assert "Adding mallory to treasury waits for a second risk-admin: giving 1 person decide on" in (
        answer.content.decode()
    )
    assert not mallory.groups.filter(name="treasury").exists()
    proposal = PolicyProposal.objects.get(kind="membership")
    assert proposal.payload["usernames"] == ["mallory"]
    wire = submit("wire_transfer", WIRE)
    assert_nobody_new_decides(wire.pk, mallory)

    # A group that decides nothing (a new, empty one) applies at once; so does removal.
    idle = Group.objects.create(name="book-club")
    client.post(f"/admin/auth/user/{mallory.pk}/change/", _admin_change_form(mallory, [idle]))
    assert list(mallory.groups.values_list("name", flat=True)) == ["book-club"]

    # ben approves on the proposal page: now mallory decides wires.
    policy.approve_proposal(proposal.pk, actor=Person(cast["ben"]))
    assert mallory.groups.filter(name="treasury").exists()
    assert approve_code(wire.pk, mallory) == "approved"
    assert events("group.membership_changed")[-1].metadata["via"] == "four_eyes"


def test_the_admin_cannot_make_a_risk_admin_through_superuser_or_permissions(wire_cast_four_eyes, client):
    """A superuser flag or the policy permission on a person or a group makes a risk-admin
    that no membership shows: the admin does not set them while four eyes holds."""
    from django.contrib.auth.models import Permission

    cast = wire_cast_four_eyes
    root = _person("root", is_staff=True, is_superuser=True)
    mallory = cast["mallory"]
    change_policy = Permission.objects.get(codename="change_riskrule")
    club = Group.objects.create(name="book-club")
    mallory.groups.add(club)
    client.force_login(root)

    client.post(
        f"/admin/auth/user/{mallory.pk}/change/",
        {
            **_admin_change_form(mallory, [club]),
            "is_superuser": "on",
            "is_staff": "on",
            "user_permissions": [str(change_policy.pk)],
        },
    )
    client.post(f"/admin/auth/group/{club.pk}/change/", {"name": "book-club", "permissions": [str(change_policy.pk)]})

    # Nor rename a group into one that rules route to, nor reactivate a decider alone.
    treasury = Group.objects.get(name="treasury")
    client.post(f"/admin/auth/group/{treasury.pk}/change/", {"name": "old-treasury"})
    carol = cast["carol"]
    carol.is_active = False
    carol.save(update_fields=["is_active"])
    answer = client.post(f"/admin/auth/user/{carol.pk}/change/", _admin_change_form(carol, [treasury]), follow=True)
    assert "carol stays inactive: giving 1 person decide on wire_critical needs a second risk-admin" in (
        answer.content.decode().lower()
    )

    mallory.refresh_from_db()
    carol.refresh_from_db()
    assert not mallory.is_superuser and not mallory.user_permissions.exists()
    assert not club.permissions.exists()
    assert Group.objects.filter(name="treasury").exists() and not carol.is_active
    assert not policy.is_risk_admin(get_user_model().objects.get(pk=mallory.pk))
    proposal = dispatch.save_settings("wire_critical", actor=Person(cast["ada"]), max_extension_seconds=600)
    with pytest.raises(PolicyError) as refused:
        policy.approve_proposal(proposal.pk, actor=Person(mallory))
    assert refused.value.code == errors.NOT_PERMITTED


def test_a_risk_admin_cannot_make_a_second_risk_admin_alone(wire_cast_four_eyes):
    cast = wire_cast_four_eyes
    proposal = propose_membership(Group.objects.get(name=RISK_ADMINS), [cast["mallory"]], acting_user=cast["ada"])
    assert proposal.waits_because == "adding 1 person to risk-admins needs a second risk-admin"
    with pytest.raises(PolicyError) as refused:
        policy.approve_proposal(proposal.pk, actor=Person(cast["ada"]))
    assert refused.value.code == "four_eyes_same_person"
    assert not cast["mallory"].groups.filter(name=RISK_ADMINS).exists()


def test_no_page_can_add_someone_to_a_deciding_group_behind_four_eyes(wire_cast_four_eyes, rf, submit):
    """The net under every page: the membership change itself is refused inside a web request."""
    cast = wire_cast_four_eyes
    mallory = cast["mallory"]

    def page(request):
        mallory.groups.add(Group.objects.get(name=REVIEWERS))
        return None

    request = rf.post("/some/page/")
    request.user = cast["ada"]
    with pytest.raises(PolicyError) as refused, transaction.atomic():
        MembershipActorMiddleware(page)(request)
    assert refused.value.code == errors.NOT_PERMITTED
    assert refused.value.message.startswith("Not added: giving 1 person decide on ")
    assert "needs a second risk-admin" in refused.value.message
    assert not mallory.groups.filter(name=REVIEWERS).exists()
    assert_nobody_new_decides(submit("unknown_tool", {}).pk, mallory)


def test_an_identity_provider_claim_never_makes_a_risk_admin_and_every_change_is_audited(
    wire_cast_four_eyes, client, settings, submit
):
    cast = wire_cast_four_eyes
    newcomer = _person("sso-sam")
    sso.apply_claims(newcomer, "corp", {RISK_ADMINS, "treasury"})

    assert set(newcomer.groups.values_list("name", flat=True)) == {"treasury"}
    applied = events("membership.claims_applied")[-1]
    assert applied.metadata == {
        "user": "sso-sam",
        "provider": "corp",
        "added": ["treasury"],
        "removed": [],
        "ignored": [RISK_ADMINS],
    }
    # A claim can take risk-admins away (narrowing), never give it.
    sso.apply_claims(cast["ben"], "corp", set())
    assert not cast["ben"].groups.exists()

    settings.OIDC_PROVIDERS = [{"id": "corp", "name": "Corp", "issuer": "https://idp.example", "client_id": "x"}]
    client.force_login(cast["ada"])
    page = client.get("/rules/").content.decode()
    assert "Groups from identity providers" in page and "sso-sam" in page and "ignored: risk-admins" in page

    # sam decides what treasury decides (the claim is trusted), and nothing a risk-admin decides.
    proposal = dispatch.save_settings("wire_critical", actor=Person(cast["ada"]), max_extension_seconds=600)
    with pytest.raises(PolicyError) as refused:
        policy.approve_proposal(proposal.pk, actor=Person(newcomer))
    assert refused.value.code == errors.NOT_PERMITTED
    assert_nobody_new_decides(submit("unknown_tool", {}).pk, newcomer)


# --- Four eyes by behaviour: a search over single edits ------------------------------------------

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


# --- The pure comparison, as the service uses it ---------------------------------------------------


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
