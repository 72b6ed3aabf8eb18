"""Who may decide is policy (issue 22, item 1): joining a deciding group, and becoming a
risk-admin, waits for a second risk-admin whatever the path (the Django admin, superuser or
permissions, any page, a sign-in claim), and every change is audited. Four eyes is ON here;
the cast is in tests/guards/authority.py.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from approvals import errors, policy
from approvals.models import PolicyProposal
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.permissions import REVIEWERS, RISK_ADMINS
from approvals.policy import PolicyError
from approvals.policy.membership_gate import propose_membership
from controlplane.accounts import sso
from controlplane.accounts.membership import MembershipActorMiddleware

from .authority import WIRE, _person, approve_code, assert_nobody_new_decides, events

pytestmark = pytest.mark.django_db


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
