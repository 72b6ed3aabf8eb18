"""Linking Slack in the browser: the signed-in person sees the exact Slack identity the
`/approvals-link` command started (enterprise, workspace, user) and confirms it; the link
shows on their Slack page; unlinking there removes it."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import SlackLink, SlackLinkStart
from audit.models import AuditEvent

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOKEN = "browser-link-token-" + "k" * 24


def started_in_slack(*, enterprise: str, team: str, user: str) -> str:
    """What `/approvals-link` leaves: a one-time start for that identity; its path."""
    SlackLinkStart.objects.create(
        token_sha256=hashlib.sha256(TOKEN.encode()).hexdigest(),
        enterprise_id=enterprise,
        team_id=team,
        slack_user_id=user,
        expires_at=timezone.now() + timedelta(minutes=10),
    )
    return f"/slack/link/{TOKEN}/"


def test_link_confirmed_in_the_browser_shows_on_the_slack_page_and_unlinks(logged_in_page, people, artifacts_dir):
    path = started_in_slack(enterprise="E0ENTERPRISE", team="T0TEAM", user="U_BOB")
    page = logged_in_page("bob", "bob-pw-123!")
    page.goto(path)

    confirm = page.locator("#slack-link-confirm")
    assert confirm.locator("h1").inner_text() == "Link this Slack account?"
    assert confirm.locator("[data-slack=enterprise]").inner_text() == "E0ENTERPRISE"
    assert confirm.locator("[data-slack=team]").inner_text() == "T0TEAM"
    assert confirm.locator("[data-slack=user]").inner_text() == "U_BOB"
    assert "bob" in confirm.inner_text()
    assert not SlackLink.objects.exists()  # seeing it links nothing
    page.screenshot(path=str(artifacts_dir / "slack-link-confirm.png"))

    page.click("#slack-link-submit")
    page.wait_for_url(page.server_url + "/slack/links/")
    assert (
        "Linked Slack enterprise E0ENTERPRISE, workspace T0TEAM, user U_BOB."
        in page.locator("#flash-stack").inner_text()
    )
    (row,) = page.locator("#slack-links li").all()
    page.screenshot(path=str(artifacts_dir / "slack-links.png"))
    assert row.get_attribute("data-slack-link") == "E0ENTERPRISE/T0TEAM/U_BOB"
    assert "enterprise E0ENTERPRISE, workspace T0TEAM, user U_BOB" in row.inner_text()
    link = SlackLink.objects.get()
    assert (link.user.username, link.enterprise_id, link.team_id, link.slack_user_id) == (
        "bob",
        "E0ENTERPRISE",
        "T0TEAM",
        "U_BOB",
    )

    page.goto(path)  # one time: the start is spent
    assert "Link this Slack account?" not in page.content()

    page.goto("/slack/links/")
    page.click("#slack-unlink")
    page.wait_for_url(page.server_url + "/slack/links/")
    assert page.locator("#slack-links-none").inner_text() == "No Slack account is linked."
    assert "Unlinked every Slack account." in page.locator("#flash-stack").inner_text()
    assert not SlackLink.objects.exists()
    verbs = list(
        AuditEvent.objects.filter(verb__startswith="auth.chat_").order_by("seq").values_list("verb", "actor_label")
    )
    assert verbs == [("auth.chat_linked", "bob"), ("auth.chat_unlinked", "bob")]


def test_another_person_cannot_see_or_unlink_your_link(logged_in_page, people):
    SlackLink.objects.create(user=people["bob"], team_id="T0TEAM", slack_user_id="U_BOB")
    page = logged_in_page("alice", "alice-pw-123!")
    page.goto("/slack/links/")
    assert page.locator("#slack-links-none").is_visible()
    assert "U_BOB" not in page.content()
    assert SlackLink.objects.filter(user=people["bob"]).exists()
