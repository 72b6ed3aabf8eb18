"""Risk admins and auditors in a real browser (Debian chromium, real daphne): each role
lands on its own page through the real sign-in form; the condition builder suggests
the paths known for the rule's action type and flags one nothing provides
(`impact.recipents`), refuses an empty value; a policy change reads side by side in
words. Seen before: risk admins and auditors landed on an empty reviewer queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from approvals import policy
from approvals.models import PolicyVersion
from approvals.people import Person
from approvals.permissions import AUDITORS, REVIEWERS, RISK_ADMINS
from tests.browser import test_sso

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

sso_site = test_sso.sso_site  # the loopback identity provider and its own daphne (module scope)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def member_of(username: str, *groups: str):
    user = get_user_model().objects.create_user(username, is_staff=RISK_ADMINS in groups)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


def sign_in_through_the_form(new_context, daphne_server, username: str, password: str):
    """The real sign-in form, as a person would use it; the page where it lands."""
    from tests.browser.conftest import _server_can_check

    _server_can_check(username, password)
    page = new_context().new_page()
    page.goto("/login/")
    page.fill("#id_login", username)
    page.fill("#id_password", password)
    page.click("form button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    page.wait_for_load_state()
    return page


@pytest.mark.parametrize(
    ("groups", "lands_on", "heading"),
    [
        ((REVIEWERS,), "/", None),
        ((RISK_ADMINS,), "/rules/", "Risk rules"),
        ((AUDITORS,), "/audit/", "Audit log"),
        ((AUDITORS, REVIEWERS), "/", None),  # several roles, one of them reviewing: where the work waits
    ],
)
def test_each_role_lands_on_its_own_page_after_signing_in(new_context, daphne_server, groups, lands_on, heading):
    member_of("pat", *groups)
    page = sign_in_through_the_form(new_context, daphne_server, "pat", "pat-signs-in-123!")
    assert page.url == daphne_server.url + lands_on
    if heading:
        assert page.inner_text("h1") == heading


def test_the_condition_builder_suggests_known_paths_and_flags_one_nothing_provides(logged_in_page, admin_user):
    admin_user.groups.add(Group.objects.get(name=RISK_ADMINS))
    page = logged_in_page(admin_user, "ada-pw-123!")
    assert page.url.endswith("/rules/")
    page.goto("/rules/send_email_default/edit/")
    suggestions = page.locator("#path-suggestions option")
    offered = {suggestions.nth(i).get_attribute("value") for i in range(suggestions.count())}
    assert {"impact.recipient_count", "params.to", "params.subject"} <= offered

    page.click("#add-condition")
    row = page.locator(".condition-row").last
    assert row.locator(".c-path").get_attribute("list") == "path-suggestions"  # the browser's autocompletion
    row.locator(".c-path").fill("impact.recipents")
    row.locator(".c-op").select_option("gt")
    # An empty value is not valid: nothing was said to compare with.
    page.locator("#validation.invalid", has_text="'value' is required").wait_for()

    row.locator(".c-value").fill("10")
    page.wait_for_selector("#validation.valid")  # valid: the warning does not block saving
    warning = page.locator("#path-warnings li", has_text="did you mean impact.recipient_count?")
    warning.wait_for()
    assert warning.get_attribute("data-field") == "conditions[0].path"
    assert "path-unknown" in row.locator(".c-path").get_attribute("class")

    row.locator(".c-path").fill("impact.recipient_count")
    page.locator("#path-warnings").wait_for(state="hidden")
    assert "path-unknown" not in row.locator(".c-path").get_attribute("class")
    assert row.locator(".c-op option:checked").inner_text() == "> (more than)"


def test_a_policy_version_reads_side_by_side_in_words(logged_in_page, admin_user):
    admin_user.groups.add(Group.objects.get(name=RISK_ADMINS))
    big = {
        "name": "big_payments",
        "priority": 6,
        "action_type": "pay_*",
        "risk_level": "high",
        "match": "any",
        "conditions": [
            {"path": "params.amount", "op": "gte", "value": 1000},
            {"path": "impact.reversible", "op": "eq", "value": False},
        ],
    }
    policy.save_rule(big, actor=Person(admin_user), note="Big or irreversible payments need approval")
    policy.save_rule(
        {
            **big,
            "enabled": False,
            "risk_level": "critical",
            "conditions": [
                {"path": "params.amount", "op": "gte", "value": 5000},
                {"path": "impact.reversible", "op": "eq", "value": False},
            ],
        },
        actor=Person(admin_user),
        note="Only the biggest, critical; off until finance agrees",
    )
    version = PolicyVersion.objects.latest()

    page = logged_in_page(admin_user, "ada-pw-123!")
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(f"/rules/history/{version.number}/")
    table = page.locator("#version-changes table.side-by-side[data-rule=big_payments]")
    text = table.inner_text()
    assert "params.amount ≥ 1000" in text and "params.amount ≥ 5000" in text
    assert "impact.reversible is false" in text
    for raw in ("True", "False", "{'path'", "[{"):
        assert raw not in text
    assert table.locator(".condition-removed").inner_text() == "params.amount ≥ 1000"
    assert table.locator(".condition-added").inner_text() == "params.amount ≥ 5000"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("main").screenshot(path=str(SCREENSHOTS / "rule-diff.png"))


def test_the_rule_lists_columns_line_up_on_each_row(logged_in_page, admin_user):
    """Seen: the order buttons and Disable sat lower than the rule's name (a form's
    button margin inside the table)."""
    admin_user.groups.add(Group.objects.get(name=RISK_ADMINS))
    page = logged_in_page(admin_user, "ada-pw-123!")
    rows = page.locator("#rules-table tbody tr[data-rule]")
    assert rows.count() >= 5
    for index in range(rows.count()):
        row = rows.nth(index)
        centres = []
        for selector in ("td:nth-child(2) a", ".move-up", ".level", ".toggle-rule"):
            box = row.locator(selector).bounding_box()
            centres.append(box["y"] + box["height"] / 2)
        assert max(centres) - min(centres) <= 3, (row.get_attribute("data-rule"), centres)
    assert "eq" not in page.inner_text("#rules-table .conditions-cell >> nth=1").split()


def test_an_auditor_signing_in_through_the_identity_provider_lands_on_the_audit_log(sso_site, new_context):
    """The provider's groups are applied after allauth picks a page: the page is chosen again."""
    server, idp = sso_site
    idp.grant("sso-alice", ["auditors"])
    page = new_context(base_url=server.url).new_page()
    page.goto(server.url + "/login/")
    page.click("button[data-provider=test-idp]")
    page.wait_for_url(idp.issuer + "/interaction/**")
    page.fill("input[name=login]", "sso-alice")
    page.fill("input[name=password]", "anything")
    page.locator("button[type=submit]").first.click()
    page.wait_for_load_state()
    if page.url.startswith(idp.issuer):  # its consent page
        page.locator("button[type=submit]").first.click()
    page.wait_for_url(server.url + "/audit/")
    assert page.inner_text("h1") == "Audit log"
