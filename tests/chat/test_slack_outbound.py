"""The Slack Web API base passes the outbound rules (`controlplane.http.outbound`): on the
allow-list, every address it resolves to public unless allowed. A base off the list is
refused loudly (an error logged, the system check `controlplane.E011`), and nothing is sent."""

from __future__ import annotations

import logging

import pytest

from approvals.chat import posting, slack
from approvals.models import Decision, SlackMessage
from approvals.states import State
from controlplane import config_checks
from controlplane.http.outbound import OutboundURLRefused

pytestmark = pytest.mark.django_db


class TestTheWebApiBase:
    def test_an_allowed_base_is_used(self, fake_slack, submit, slack_links):
        request = submit()
        posting.post_request(request, "U_ALICE")
        assert len(fake_slack.called("chat.postMessage")) == 1

    def test_a_base_off_the_allow_list_is_refused_and_nothing_is_sent(
        self, fake_slack, settings, submit, slack_links, caplog
    ):
        settings.OUTBOUND_URL_ALLOWLIST = ["slack.com"]
        request = submit()
        with caplog.at_level(logging.ERROR, logger="approvals.chat.slack"):
            with pytest.raises(OutboundURLRefused) as refused:
                posting.post_request(request, "U_ALICE")
        assert refused.value.code == "outbound_url_not_allowed"
        assert "Slack Web API base refused (outbound_url_not_allowed)" in caplog.text
        assert fake_slack.calls == []
        assert not SlackMessage.objects.filter(request=request).exists()

    def test_a_listed_host_that_is_loopback_is_refused_unless_private_addresses_are_allowed(self, fake_slack, settings):
        settings.OUTBOUND_ALLOW_PRIVATE = False
        with pytest.raises(OutboundURLRefused) as refused:
            slack.web_client()
        assert refused.value.code == "outbound_url_private"

    def test_credentials_in_the_base_are_refused(self, fake_slack, settings):
        settings.SLACK_API_URL = fake_slack.url.replace("http://", "http://user:pw@") + "api/"
        with pytest.raises(OutboundURLRefused) as refused:
            slack.web_client()
        assert refused.value.code == "outbound_url_invalid"

    def test_reject_with_a_refused_base_opens_nothing_decides_nothing_and_says_so(
        self, fake_slack, settings, submit, press, slack_links
    ):
        request = submit()
        settings.OUTBOUND_URL_ALLOWLIST = ["slack.com"]
        assert press(request, "reject").status_code == 200
        assert fake_slack.called("views.open") == []
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert not Decision.objects.filter(request=request).exists()
        (said,) = [args["text"] for name, args in fake_slack.calls if name == "respond"]
        assert "outbound_url_not_allowed" in said and "nothing was decided" in said


class TestTheSystemCheck:
    def test_slack_on_with_its_base_off_the_allow_list_is_an_error(self, settings):
        settings.SLACK_BOT_TOKEN = "xoxb-test"
        settings.SLACK_API_URL = "https://slack.com/api/"
        settings.OUTBOUND_URL_ALLOWLIST = ["hooks.example.com"]
        (error,) = config_checks.slack_api_url_allowed(None)
        assert error.id == "controlplane.E011"
        assert "slack.com" in error.msg and "OUTBOUND_URL_ALLOWLIST" in error.msg

    def test_slack_on_with_slack_com_listed_passes(self, settings):
        settings.SLACK_BOT_TOKEN = "xoxb-test"
        settings.SLACK_API_URL = "https://slack.com/api/"
        settings.OUTBOUND_URL_ALLOWLIST = ["slack.com"]
        assert config_checks.slack_api_url_allowed(None) == []

    def test_slack_off_is_not_checked(self, settings):
        settings.SLACK_BOT_TOKEN = ""
        settings.OUTBOUND_URL_ALLOWLIST = []
        assert config_checks.slack_api_url_allowed(None) == []
