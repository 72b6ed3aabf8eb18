"""Each role lands on its own page after signing in: reviewers on the queue, where their
work waits; risk admins on the rules; auditors on the audit log. Someone with several
roles who may review lands on the queue; a `next` the sign-in carried always wins."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from approvals import policy
from approvals.people import Person
from approvals.permissions import AUDITORS, RISK_ADMINS
from controlplane.navigation import landing_url

from .conftest import LOGIN, sign_in

pytestmark = pytest.mark.usefixtures("nobody_required")


def person(name: str, *groups: str):
    user = get_user_model().objects.create_user(name, password=f"{name}-pw-123!")
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


def lands_on(username: str, **extra: str) -> str:
    response = sign_in(Client(), username, **extra)
    assert response.status_code == 302, response
    return response["Location"]


def test_a_reviewer_lands_on_the_queue(people):
    assert lands_on("alice") == "/"


def test_a_risk_admin_lands_on_the_rules(admin_user):
    assert lands_on("ada") == "/rules/"


def test_an_auditor_lands_on_the_audit_log(db):
    person("aud", AUDITORS)
    assert lands_on("aud") == "/audit/"


def test_a_risk_admin_who_also_audits_lands_on_the_rules(db):
    person("both", RISK_ADMINS, AUDITORS)
    assert lands_on("both") == "/rules/"


def test_someone_who_may_review_lands_on_the_queue_whatever_else_they_are(people):
    people["bob"].groups.add(*Group.objects.filter(name__in=[RISK_ADMINS, AUDITORS]))
    assert lands_on("bob") == "/"


def test_a_member_of_a_rules_approver_group_reviews_too(admin_user):
    finance = Group.objects.create(name="finance-approvers")
    policy.save_rule(
        {
            "name": "payments",
            "priority": 5,
            "action_type": "pay_*",
            "risk_level": "high",
            "approver_group": "finance-approvers",
            "conditions": [],
        },
        actor=Person(admin_user),
        note="finance decides payments",
    )
    person("fin", AUDITORS).groups.add(finance)
    assert lands_on("fin") == "/"


def test_someone_with_no_role_lands_on_the_queue_which_says_so(people):
    assert lands_on("mallory") == "/"


def test_a_next_address_wins_over_the_landing_page(db):
    person("aud", AUDITORS)
    response = Client().post(f"{LOGIN}?next=/audit/verify/", {"login": "aud", "password": "aud-pw-123!"})
    assert response["Location"] == "/audit/verify/"


def test_a_next_address_off_the_site_is_ignored_for_the_landing_page(db):
    person("aud", AUDITORS)
    response = Client().post(f"{LOGIN}?next=https://evil.example/", {"login": "aud", "password": "aud-pw-123!"})
    assert response["Location"] == "/audit/"


def test_the_landing_page_is_chosen_in_a_bounded_number_of_queries(db, django_assert_max_num_queries):
    auditor = person("aud", AUDITORS)
    with django_assert_max_num_queries(3):
        assert landing_url(auditor) == "/audit/"


# --- Through an identity provider -----------------------------------------------------------------
# allauth picks the landing page before `user_logged_in` applies the provider's groups
# (controlplane.accounts.sso), so the page is chosen again once they are applied.


def provider_sign_in(user, groups: list[str], *, next_url: str = ""):
    from types import SimpleNamespace

    from allauth.core import context
    from django.contrib.messages.storage.fallback import FallbackStorage
    from django.contrib.sessions.backends.db import SessionStore
    from django.test import RequestFactory

    from controlplane.accounts.adapter import AccountAdapter

    request = RequestFactory().get(f"/accounts/oidc/test-idp/login/callback/{'?next=' + next_url if next_url else ''}")
    request.session = SessionStore()
    request._messages = FallbackStorage(request)
    request.user = user
    sociallogin = SimpleNamespace(
        account=SimpleNamespace(
            provider="test-idp", uid=f"sub-{user.username}", extra_data={"userinfo": {"groups": groups}}
        )
    )
    with context.request_context(request):  # allauth's middleware sets this on a real request
        return AccountAdapter().post_login(
            request,
            user,
            email_verification="none",
            email=None,
            signup=False,
            redirect_url=None,
            signal_kwargs={"sociallogin": sociallogin},
        )


def test_a_first_sign_in_through_the_provider_lands_where_its_groups_say(db):
    newcomer = person("sso-ann")
    assert provider_sign_in(newcomer, [AUDITORS])["Location"] == "/audit/"
    assert list(newcomer.groups.values_list("name", flat=True)) == [AUDITORS]


def test_losing_a_role_at_the_provider_changes_the_landing_page_at_once(db):
    former_admin = person("sso-rita", RISK_ADMINS)
    assert provider_sign_in(former_admin, [AUDITORS])["Location"] == "/audit/"


def test_a_next_address_wins_through_the_provider_too(db):
    newcomer = person("sso-ann")
    assert provider_sign_in(newcomer, [AUDITORS], next_url="/audit/events/1/")["Location"] == "/audit/events/1/"
