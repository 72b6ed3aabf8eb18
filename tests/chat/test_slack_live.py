"""The Slack messages are a live view of their request (an outbox on SlackMessage): a
decision anywhere, expiry and cancellation update every message of the request, each
rendered from the database when sent, in order, through Slack outages and rate limits."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from approvals import services
from approvals.chat import live, posting
from approvals.models import ApprovalRequest, SlackMessage
from approvals.services import Person, approve
from approvals.states import State
from audit.chain import Actor

pytestmark = pytest.mark.django_db


def shown(update: dict) -> str:
    return str(update["blocks"])


def updates_by_channel(fake_slack) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for args in fake_slack.called("chat.update"):
        seen.setdefault(args["channel"], []).append(shown(args))
    return seen


@pytest.fixture
def shown_to_two(submit, fake_slack, eager_celery):
    """A pending request in alice's and owen's direct messages."""
    request = submit()
    posting.post_request(request, "U_ALICE")
    posting.post_request(request, "U_OWEN")
    return request


class TestEveryMessageFollowsTheRequest:
    def test_a_decision_in_the_browser_updates_every_message_of_the_request(
        self, shown_to_two, people, fake_slack, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            approve(shown_to_two.pk, actor=Person(people["bob"]), revision=shown_to_two.current_revision)
        seen = updates_by_channel(fake_slack)
        assert sorted(seen) == ["DU_ALICE", "DU_OWEN"]
        for renderings in seen.values():
            assert "approved by bob" in renderings[-1] and "'action_id': 'approve'" not in renderings[-1]
        assert set(SlackMessage.objects.values_list("shown_state", flat=True)) == {State.APPROVED}

    def test_a_press_in_one_message_updates_the_others(
        self, shown_to_two, press, slack_links, fake_slack, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            press(shown_to_two)  # alice, in her message
        assert sorted(updates_by_channel(fake_slack)) == ["DU_ALICE", "DU_OWEN"]
        assert all("approved by alice" in shown(update) for update in fake_slack.called("chat.update"))

    def test_expiry_and_cancellation_update_the_messages(
        self, shown_to_two, submit, agent, fake_slack, django_capture_on_commit_callbacks
    ):
        ApprovalRequest.objects.filter(pk=shown_to_two.pk).update(decide_by=timezone.now() - timedelta(seconds=1))
        with django_capture_on_commit_callbacks(execute=True):
            assert services.expire(shown_to_two.pk)
        assert all(State.EXPIRED in shown(update) for update in fake_slack.called("chat.update"))

        withdrawn = submit()
        posting.post_request(withdrawn, "U_ALICE")
        with django_capture_on_commit_callbacks(execute=True):
            services.cancel(withdrawn.pk, actor=Actor.for_agent(agent), agent=agent, reason="not needed")
        last = fake_slack.called("chat.update")[-1]
        assert last["ts"] == SlackMessage.objects.get(request=withdrawn).ts and State.CANCELLED in shown(last)
        assert "'action_id': 'reject'" not in shown(last)

    def test_a_change_whose_signal_was_lost_is_found_by_the_sweep(
        self, shown_to_two, people, fake_slack, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):  # the process died right after commit
            approve(shown_to_two.pk, actor=Person(people["bob"]), revision=shown_to_two.current_revision)
        assert fake_slack.called("chat.update") == []
        assert live.sweep() == [str(shown_to_two.pk)]
        assert live.deliver_request(str(shown_to_two.pk)) == 2
        assert live.sweep() == []  # settled: nothing more to send
        assert all("approved by bob" in shown(update) for update in fake_slack.called("chat.update"))

    def test_a_dm_posted_while_the_request_was_being_decided_is_updated_at_once(
        self, submit, people, fake_slack, eager_celery
    ):
        request = submit()
        stale = ApprovalRequest.objects.get(pk=request.pk)
        approve(request.pk, actor=Person(people["bob"]), revision=request.current_revision)
        posting.post_request(stale, "U_ALICE")  # rendered from the copy read before the decision
        (update,) = fake_slack.called("chat.update")
        assert "approved by bob" in shown(update)


@pytest.mark.django_db(transaction=True)
class TestOrder:
    def test_a_change_made_while_an_update_is_on_its_way_is_sent_after_it(
        self, submit, people, fake_slack, eager_celery
    ):
        request = submit()
        posting.post_request(request, "U_ALICE")
        live.mark_changed(str(request.pk))  # a change that keeps it pending (say, an escalation)
        fake_slack.slow("chat.update", 1.0)

        def send() -> None:
            try:
                live.deliver_request(str(request.pk))
            finally:
                connection.close()

        sender = threading.Thread(target=send)
        sender.start()
        try:
            while not any(name == "chat.update" for name, _ in fake_slack.calls) and sender.is_alive():
                threading.Event().wait(0.02)
            # the first rendering (pending) is on its way; the decision commits and its
            # signal's task finds the message leased: it sends nothing of its own
            approve(request.pk, actor=Person(people["bob"]), revision=request.current_revision)
        finally:
            sender.join(10)
        renderings = [shown(update) for update in fake_slack.called("chat.update")]
        assert len(renderings) == 2
        assert "'action_id': 'approve'" in renderings[0]
        assert "approved by bob" in renderings[-1] and "'action_id': 'approve'" not in renderings[-1]
        message = SlackMessage.objects.get(request=request)
        assert (message.sent, message.wanted, message.lease_until) == (2, 2, None)


class TestSlackTrouble:
    def test_slack_down_never_blocks_or_loses_a_decision_made_elsewhere(
        self, shown_to_two, people, fake_slack, settings, django_capture_on_commit_callbacks
    ):
        settings.SLACK_API_URL = "http://127.0.0.1:9/api/"  # nothing listens there
        with django_capture_on_commit_callbacks(execute=True):
            approve(shown_to_two.pk, actor=Person(people["bob"]), revision=shown_to_two.current_revision)
        shown_to_two.refresh_from_db()
        assert shown_to_two.state == State.APPROVED
        messages = list(SlackMessage.objects.all())
        assert all(m.sent < m.wanted and m.retry_at and "Error" in m.last_error for m in messages)

        settings.SLACK_API_URL = fake_slack.url + "api/"  # Slack is back
        assert live.deliver_request(str(shown_to_two.pk), now=timezone.now() + timedelta(minutes=1)) == 2
        assert all("approved by bob" in shown(update) for update in fake_slack.called("chat.update"))

    def test_a_rate_limit_leaves_the_message_due_at_retry_after(
        self, shown_to_two, people, fake_slack, django_capture_on_commit_callbacks
    ):
        fake_slack.limit("chat.update", 7)
        before = timezone.now()
        with django_capture_on_commit_callbacks(execute=True):
            approve(shown_to_two.pk, actor=Person(people["bob"]), revision=shown_to_two.current_revision)
        assert ("chat.update", "ratelimited") in fake_slack.refused
        limited = SlackMessage.objects.filter(last_error="ratelimited").get()
        assert before + timedelta(seconds=7) <= limited.retry_at <= timezone.now() + timedelta(seconds=7)
        assert live.deliver(limited.pk) == "not_due"  # not before Retry-After
        assert live.deliver(limited.pk, now=limited.retry_at) == "sent"
        assert SlackMessage.objects.filter(sent__lt=F("wanted")).count() == 0

    def test_a_message_slack_refuses_for_good_is_given_up_not_retried(
        self, shown_to_two, people, fake_slack, django_capture_on_commit_callbacks
    ):
        SlackMessage.objects.filter(slack_user_id="U_OWEN").update(ts="1.000000")  # not a message: the fake refuses
        fake_slack.refuse_ts = "1.000000"
        with django_capture_on_commit_callbacks(execute=True):
            approve(shown_to_two.pk, actor=Person(people["bob"]), revision=shown_to_two.current_revision)
        owen = SlackMessage.objects.get(slack_user_id="U_OWEN")
        assert (owen.last_error, owen.sent == owen.wanted, owen.retry_at) == ("message_not_found", True, None)
        assert live.sweep() == []
