"""Reject from Slack: the press opens a feedback modal inline in the acknowledgement
(views.open with the press's trigger_id, which Slack kills 3 s after the click), and the
modal's submission rejects with that feedback through the one decision adapter."""

from __future__ import annotations

import inspect
import json

import pytest

from approvals.chat import views
from approvals.models import Decision
from approvals.services import Person, approve
from approvals.states import State
from tests.chat.conftest import modal_submission, post_payload

pytestmark = pytest.mark.django_db


def answers(fake_slack) -> list[str]:
    return [args["text"] for name, args in fake_slack.calls if name == "respond"]


class TestRejectWithFeedback:
    def test_reject_opens_the_modal_and_its_submission_rejects_with_the_feedback(
        self, submit, press, client, slack_links, fake_slack
    ):
        request = submit()
        trigger = fake_slack.trigger()
        assert press(request, "reject", trigger=trigger).status_code == 200
        (opened,) = fake_slack.called("views.open")
        assert opened["trigger_id"] == trigger
        assert opened["view"]["callback_id"] == "reject_feedback"
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL  # the press alone decides nothing
        assert Decision.objects.filter(request=request).count() == 0

        submitted = post_payload(client, modal_submission(opened["view"], "Wrong recipient, use the list."))
        assert submitted.status_code == 200 and submitted.content == b""  # an empty 200 closes the modal
        request.refresh_from_db()
        assert request.state == State.REJECTED
        decision = Decision.objects.get(request=request)
        assert (decision.reviewer.username, decision.feedback) == ("alice", "Wrong recipient, use the list.")
        assert decision.revision == request.current_revision
        assert answers(fake_slack) == ["send_email rejected."]

    def test_an_empty_feedback_still_rejects(self, submit, reject_with, slack_links, fake_slack):
        request = submit()
        reject_with(request, None)
        request.refresh_from_db()
        assert request.state == State.REJECTED
        assert Decision.objects.get(request=request).feedback == ""

    def test_the_press_is_acknowledged_and_the_modal_opened_without_a_database_query(
        self, submit, press, slack_links, fake_slack, django_assert_num_queries
    ):
        request = submit()
        with django_assert_num_queries(0):
            assert press(request, "reject").status_code == 200
        assert fake_slack.refused == []
        assert inspect.iscoroutinefunction(views.interactivity)  # the event loop is never blocked on Slack

    def test_an_expired_trigger_decides_nothing_and_says_so(self, submit, press, slack_links, fake_slack):
        request = submit()
        press(request, "reject", trigger=fake_slack.trigger(age=3.5))
        assert fake_slack.refused == [("views.open", "expired_trigger_id")]
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        (said,) = answers(fake_slack)
        assert "expired_trigger_id" in said and "nothing was decided" in said

    def test_a_submission_by_an_unlinked_or_unpermitted_person_rejects_nothing(
        self, submit, press, client, slack_links, fake_slack
    ):
        request = submit()
        press(request, "reject")
        opened = fake_slack.called("views.open")[-1]["view"]
        post_payload(client, modal_submission(opened, "no", slack_user="U_STRANGER"))
        post_payload(client, modal_submission(opened, "no", slack_user="U_MALLORY"))
        post_payload(client, modal_submission(opened, "no", team="T0OTHER"))  # alice's id, another workspace
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert Decision.objects.filter(request=request).count() == 0
        assert answers(fake_slack)[0].startswith("Link your account first")

    def test_a_submission_after_a_decision_elsewhere_changes_nothing(
        self, submit, press, client, people, slack_links, fake_slack
    ):
        request = submit()
        press(request, "reject")
        opened = fake_slack.called("views.open")[-1]["view"]
        approve(request.pk, actor=Person(people["bob"]), revision=request.current_revision)
        post_payload(client, modal_submission(opened, "too late"))
        request.refresh_from_db()
        assert request.state == State.APPROVED
        assert list(Decision.objects.filter(request=request).values_list("reviewer__username", flat=True)) == ["bob"]

    def test_a_submission_of_another_view_or_a_tampered_one_is_refused(
        self, submit, press, client, slack_links, fake_slack
    ):
        request = submit()
        press(request, "reject")
        opened = dict(fake_slack.called("views.open")[-1]["view"])
        post_payload(client, modal_submission({**opened, "callback_id": "something_else"}, "x"))
        post_payload(client, modal_submission({**opened, "private_metadata": "not json"}, "x"))
        post_payload(client, modal_submission({**opened, "private_metadata": json.dumps({"value": "x:1"})}, "x"))
        unsigned = post_payload(client, modal_submission(opened, "x"), secret="not-the-secret-" + "y" * 20)
        assert unsigned.status_code == 401 and unsigned.json()["code"] == "slack_signature_invalid"
        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
