"""Slack's bounds: the fake Slack refuses what Slack refuses (so passing means something),
messages about any request fit (long params cut safely, masked ones stay masked), and
Slack's 429 Retry-After is honoured by the DM outbox too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from slack_sdk.errors import SlackApiError

from approvals import policy
from approvals.chat import posting, render, slack
from approvals.masking import MASK
from approvals.models import Notification, SlackMessage
from approvals.notifications import dispatch
from approvals.people import Person

pytestmark = pytest.mark.django_db

SECRET_BODY = "s3cr3t-body-" + "q" * 40


def button(value: str) -> dict:
    return {"type": "button", "action_id": "x", "value": value, "text": {"type": "plain_text", "text": "x"}}


class TestTheFakeRefusesWhatSlackRefuses:
    @pytest.mark.parametrize(
        "blocks",
        [
            [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 51,
            [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}],
            [{"type": "actions", "elements": [button("v" * 2001)]}],
        ],
        ids=["51 blocks", "section text of 3,001", "button value of 2,001"],
    )
    def test_over_the_bound_is_invalid_blocks(self, fake_slack, blocks):
        with pytest.raises(SlackApiError) as refused:
            slack.web_client().chat_postMessage(channel="U_ALICE", text="x", blocks=blocks)
        assert refused.value.response["error"] == "invalid_blocks"

    def test_at_the_bound_is_taken(self, fake_slack):
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}] * 49
        blocks.append({"type": "actions", "elements": [button("v" * 2000)]})
        assert slack.web_client().chat_postMessage(channel="U_ALICE", text="x", blocks=blocks)["ok"]

    def test_a_rate_limit_answers_429_with_retry_after(self, fake_slack):
        fake_slack.limit("chat.postMessage", 9)
        with pytest.raises(SlackApiError) as limited:
            slack.web_client().chat_postMessage(channel="U_ALICE", text="x")
        assert limited.value.response.status_code == 429
        assert limited.value.response.headers["Retry-After"] in ("9", ["9"])


@pytest.fixture
def masking_mail(admin_user):
    policy.save_rule(
        {
            "name": "masked_mail",
            "priority": 1,
            "action_type": "send_email",
            "risk_level": "high",
            "masked_params": ["body"],
            "conditions": [],
        },
        actor=Person(admin_user),
        note="mail bodies are private",
    )


class TestLongRequestsFit:
    def test_long_params_are_cut_within_slacks_bounds_and_masked_ones_stay_masked(
        self, submit, masking_mail, fake_slack
    ):
        params = {
            "to": [f"person{n}@example.com" for n in range(400)],
            "subject": "<!channel> & ```break out``` " + "&" * 3000,
            "body": SECRET_BODY * 100,
        }
        request = submit(params=params)
        posting.post_request(request, "U_ALICE")
        assert fake_slack.refused == []
        (posted,) = fake_slack.called("chat.postMessage")
        blocks = posted["blocks"]
        assert len(blocks) <= 50
        texts = [block["text"]["text"] for block in blocks if block["type"] == "section"]
        assert all(len(text) <= 3000 for text in texts)
        shown = str(blocks)
        assert "s3cr3t" not in shown and MASK in shown
        assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown
        assert "more characters; open the card" in shown
        params_text = next(text for text in texts if text.startswith("*Params*"))
        assert params_text.endswith("```") and params_text.count("```") == 2  # the code block closes

    def test_a_decided_request_by_a_long_name_still_fits(self, submit, people, fake_slack):
        request = submit()
        request.decided_by_label = "<b>" + "n" * 5000
        blocks = slack.blocks_for(request)
        assert all(len(element["text"]) <= 3000 for block in blocks for element in block.get("elements", []))


@hypothesis_settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="&<>ab`\u2022", max_size=4000), limit=st.integers(min_value=120, max_value=3000))
def test_cutting_never_exceeds_the_bound_nor_splits_an_escape(text, limit):
    cut = render.fit(render.escape(text), limit)
    assert len(cut) <= limit
    kept = cut.split("\n… (cut:", 1)[0]
    assert not render._PARTIAL_ENTITY.search(kept) or kept.endswith(("&amp;", "&lt;", "&gt;"))
    assert "<" not in cut and ">" not in cut


class TestRateLimitedDirectMessages:
    def test_a_429_on_a_dm_is_retried_at_retry_after_and_never_posts_twice(
        self, submit, admin_user, slack_links, fake_slack
    ):
        dispatch.save_settings("send_email_default", actor=Person(admin_user), notify_on_arrival=True)
        request = submit()
        dispatch.queue_arrival(request.pk)
        notification = Notification.objects.get(request=request, channel="slack")
        fake_slack.limit("chat.postMessage", 20, after=1)  # alice's DM goes out, owen's is limited
        sent_at = notification.next_attempt_at
        assert dispatch.deliver(notification.pk, now=sent_at) == "retry"
        notification.refresh_from_db()
        assert notification.next_attempt_at == sent_at + timedelta(seconds=20)
        assert list(SlackMessage.objects.values_list("slack_user_id", flat=True)) == ["U_ALICE"]
        assert dispatch.deliver(notification.pk, now=sent_at + timedelta(seconds=19)) == "not_due"
        assert dispatch.deliver(notification.pk, now=sent_at + timedelta(seconds=20)) == "delivered"
        assert sorted(SlackMessage.objects.values_list("slack_user_id", flat=True)) == ["U_ALICE", "U_OWEN"]
        assert sorted(args["channel"] for args in fake_slack.called("chat.postMessage")) == ["U_ALICE", "U_OWEN"]
