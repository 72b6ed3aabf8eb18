"""Where a resolver reads the target, the card shows what the call would change on it
as it is now, and warns when the target moved since the agent looked."""

from __future__ import annotations

import pytest

from approvals.models import RuleNotification
from approvals.snapshots import register_target_resolver, unregister_target_resolver

pytestmark = pytest.mark.django_db

DOCUMENT = {"id": "doc-7", "title": "Runbook", "content": "step one\nstep two\n"}


@pytest.fixture
def document():
    current = dict(DOCUMENT)

    @register_target_resolver("update_document")
    def resolve(target):
        return dict(current)

    yield current
    unregister_target_resolver(resolve)


def test_the_card_diffs_the_proposed_content_against_the_current_document(document, submit, login_as, people):
    submit(
        "update_document",
        params={"content": "step one\nstep two, carefully\n", "title": "Runbook"},
        target={"id": "doc-7"},
    )
    page = login_as(people["alice"]).get("/").content.decode()
    assert "What changes on the target" in page
    assert '<span class="diff-del">- step two</span>' in page
    assert '<span class="diff-add">+ step two, carefully</span>' in page
    assert "The target changed after the agent submitted" not in page


def test_the_card_warns_when_the_target_moved_after_submission(document, submit, login_as, people):
    submit("update_document", params={"content": "new text"}, target={"id": "doc-7"})
    document["content"] = "someone else rewrote it"
    page = login_as(people["alice"]).get("/").content.decode()
    assert "The target changed after the agent submitted" in page


def test_without_a_resolver_the_card_shows_no_target_diff(submit, login_as, people):
    submit("update_document", params={"content": "x"}, target={"id": "doc-7"})
    assert "What changes on the target" not in login_as(people["alice"]).get("/").content.decode()


def test_a_reviewer_extends_the_deadline_once_from_the_card(submit, login_as, people):
    request = submit("update_document", params={"content": "x"})
    RuleNotification.objects.create(rule_name=request.rule_name, max_extension_seconds=7200)
    client = login_as(people["alice"])
    page = client.get("/").content.decode()
    assert f'action="/rules/requests/{request.pk}/extend-deadline/"' in page
    before = request.decide_by
    client.post(f"/rules/requests/{request.pk}/extend-deadline/", {"seconds": "3600", "reason": "need the owner"})
    request.refresh_from_db()
    assert (request.decide_by - before).total_seconds() == 3600
    response = client.post(f"/rules/requests/{request.pk}/extend-deadline/", {"seconds": "900"}, follow=True)
    request.refresh_from_db()
    assert (request.decide_by - before).total_seconds() == 3600
    assert "already" in response.content.decode().lower()
