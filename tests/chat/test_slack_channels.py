"""A rule may also tell a Slack channel, with a stub only (action type, risk, deadline, a
link): channel messages live in Slack's search and retention, where people without view
permission read them. Routing changes expose nothing and decide nothing."""

from __future__ import annotations

import pytest

from approvals.models import Notification, RuleNotification, SlackMessage
from approvals.notifications import dispatch
from approvals.people import Person

pytestmark = pytest.mark.django_db


def test_a_rules_channel_gets_a_stub_once_and_nothing_else(submit, admin_user, slack_links, fake_slack):
    dispatch.save_settings(
        "send_email_default", actor=Person(admin_user), notify_on_arrival=False, slack_channel="C0APPROVALS"
    )
    request = submit(params={"to": ["dana@example.com"], "subject": "Payroll run", "body": "Salaries attached"})
    dispatch.queue_arrival(request.pk)
    stub = Notification.objects.get(request=request, channel="slack_stub")
    assert stub.destination == "C0APPROVALS"
    assert dispatch.deliver(stub.pk) == "delivered"
    assert dispatch.deliver(stub.pk) == "not_due"  # once
    (posted,) = fake_slack.called("chat.postMessage")
    assert posted["channel"] == "C0APPROVALS"
    shown = str(posted["blocks"]) + posted["text"]
    assert "send_email" in shown and request.risk_level in shown and f"/requests/{request.pk}/" in shown
    for private in ("dana@example.com", "Payroll run", "Salaries", "mail-bot", "outbox", "send_email_default"):
        assert private not in shown, private
    assert all(block["type"] == "section" for block in posted["blocks"])  # no buttons: nobody decides in a channel
    assert not SlackMessage.objects.exists()  # and it is no live message


def test_a_channel_is_named_by_its_id_only(admin_user):
    for name in ("#general", "general", "C0 SPACE", "U0PERSON1"):
        with pytest.raises(ValueError, match="slack_channel"):
            dispatch.save_settings("send_email_default", actor=Person(admin_user), slack_channel=name)
    assert not RuleNotification.objects.filter(slack_channel__gt="").exists()


def test_the_rules_page_shows_and_saves_the_channel(client, admin_user):
    client.force_login(admin_user)
    assert 'name="slack_channel"' in client.get("/rules/send_email_default/edit/").content.decode()
    client.post("/rules/send_email_default/notifications/", {"notify_on_arrival": "1", "slack_channel": "C0ROOM1"})
    assert RuleNotification.objects.get(rule_name="send_email_default").slack_channel == "C0ROOM1"
