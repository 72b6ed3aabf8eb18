"""History that opens: each row leads to the request's page, which shows everything
the request went through to whoever may look at it, and nobody else. History's
filters offer every value in the person's visible history."""

from __future__ import annotations

import pytest

from approvals import services
from approvals.states import State
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_person_transfer(submit, people, two_person_rule):
    """A transfer alice edited (revision 2), then alice and bob approved: two approvers."""
    request = submit("transfer_funds", params={"amount": "900.00", "to": "acct-1", "memo": "rent"})
    services.approve_with_edits(
        request.pk,
        revision=current_revision(request.pk),
        actor=services.Person(people["alice"]),
        edits={"amount": "450.00"},
    )
    services.approve(
        request.pk,
        revision=current_revision(request.pk),
        actor=services.Person(people["bob"]),
        feedback="Matches the invoice.",
    )
    request.refresh_from_db()
    assert request.state == State.APPROVED and request.current_revision == 2
    return request


def test_a_history_row_opens_the_request_page(two_person_transfer, login_as, people):
    history = login_as(people["carol"]).get("/history/").content.decode()
    assert f'href="/requests/{two_person_transfer.pk}/"' in history


def test_a_two_person_approval_shows_both_approvers_in_history_and_on_its_page(two_person_transfer, login_as, people):
    client = login_as(people["carol"])
    history = client.get("/history/").content.decode()
    assert "alice and bob" in history
    page = client.get(f"/requests/{two_person_transfer.pk}/").content.decode()
    decisions = page[page.index('id="decisions"') : page.index('id="execution"')]
    assert decisions.count('class="decision-who"') == 2
    assert "alice" in decisions and "bob" in decisions and "Matches the invoice." in decisions


def test_an_edited_approval_is_marked_in_the_list_and_on_its_page(two_person_transfer, submit, people, login_as):
    plain = submit("transfer_funds", params={"amount": "5.00", "to": "acct-2"})
    services.reject(
        plain.pk, revision=current_revision(plain.pk), actor=services.Person(people["alice"]), feedback="no"
    )
    client = login_as(people["carol"])
    history = client.get("/history/").content.decode()
    assert history.count('<span class="tag tag-edited"') == 1 and "Edited by alice</span>" in history
    page = client.get(f"/requests/{two_person_transfer.pk}/").content.decode()
    assert "edited by alice" in page and "<code>amount</code>" in page
    assert "900.00" in page and "450.00" in page  # the revision's before and after


def test_the_page_shows_the_execution_result_and_the_audit_timeline(submit, people, login_as):
    request = submit("update_document", params={"text": "v2"}, target={"doc": "handbook"})  # the agent runs it
    services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
    from audit.chain import Actor

    actor = Actor.for_agent(request.agent)
    grant = services.claim_execution(request.pk, actor=actor, agent=request.agent)
    services.complete_execution(
        request.pk, token=grant.token, actor=actor, succeeded=True, result={"message_id": "m-77"}
    )
    page = login_as(people["bob"]).get(f"/requests/{request.pk}/").content.decode()
    assert "m-77" in page
    timeline = page[page.index('id="audit"') :]
    for verb in (
        "request.submitted",
        "request.queued",
        "request.approved",
        "request.execution_claimed",
        "request.succeeded",
    ):
        assert verb in timeline


def test_a_masked_param_stays_masked_on_the_page(submit, people, login_as):
    request = submit("send_email", params={"to": ["d@example.com"], "subject": "s", "body": "TOP-SECRET-BODY"})
    services.reject(
        request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]), feedback="no"
    )
    assert "TOP-SECRET-BODY" not in login_as(people["bob"]).get(f"/requests/{request.pk}/").content.decode()


def test_the_agents_claims_show_on_the_page_labelled(submit, people, login_as):
    request = submit("send_email", reason="<i>Trust me</i>", context={"turns": [{"role": "user", "text": "hi"}]})
    page = login_as(people["bob"]).get(f"/requests/{request.pk}/").content.decode()
    assert "The agent says" in page and "&lt;i&gt;Trust me&lt;/i&gt;" in page


def test_someone_without_view_gets_404_like_a_missing_request(two_person_transfer, login_as, people):
    import uuid

    client = login_as(people["mallory"])
    assert client.get(f"/requests/{two_person_transfer.pk}/").status_code == 404
    assert client.get(f"/requests/{uuid.uuid4()}/").status_code == 404


def test_an_auditor_may_look_at_any_request_and_its_history(two_person_transfer, auditor, login_as):
    client = login_as(auditor)
    assert client.get(f"/requests/{two_person_transfer.pk}/").status_code == 200
    assert f"/requests/{two_person_transfer.pk}/" in client.get("/history/").content.decode()


def test_an_anonymous_visitor_is_sent_to_sign_in(two_person_transfer, client):
    response = client.get(f"/requests/{two_person_transfer.pk}/")
    assert response.status_code == 302 and "login" in response["Location"]


def test_the_request_page_costs_the_same_queries_however_long_its_story(
    submit, people, login_as, two_person_rule, django_assert_max_num_queries
):
    short = submit("transfer_funds", params={"amount": "1.00", "to": "a", "memo": "m"})
    services.reject(
        short.pk, revision=current_revision(short.pk), actor=services.Person(people["alice"]), feedback="no"
    )
    long = submit("transfer_funds", params={"amount": "1.00", "to": "a", "memo": "m"})
    for n, who in enumerate(("alice", "bob", "carol")):
        services.approve_with_edits(
            long.pk,
            revision=current_revision(long.pk),
            actor=services.Person(people[who]),
            edits={"amount": f"{n + 2}.00"},
        )
    client = login_as(people["carol"])
    client.get(f"/requests/{short.pk}/")  # warm the session and permission caches
    with django_assert_max_num_queries(14) as short_page:
        assert client.get(f"/requests/{short.pk}/").status_code == 200
    with django_assert_max_num_queries(14) as long_page:
        assert client.get(f"/requests/{long.pk}/").status_code == 200
    assert len(long_page.captured_queries) == len(short_page.captured_queries)


def test_history_costs_the_same_queries_for_one_row_or_thirty(submit, people, login_as, django_assert_max_num_queries):
    def decided(n: int) -> None:
        for _ in range(n):
            request = submit("send_email")
            services.reject(
                request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]), feedback="no"
            )

    client = login_as(people["bob"])
    decided(1)
    client.get("/history/")
    with django_assert_max_num_queries(14) as one:
        client.get("/history/")
    decided(29)
    with django_assert_max_num_queries(14) as thirty:
        client.get("/history/")
    assert len(thirty.captured_queries) == len(one.captured_queries)


# --- Filters ------------------------------------------------------------------------------------


def test_history_filters_offer_every_action_type_agent_and_risk_in_the_visible_history(submit, people, login_as):
    types = [
        "send_email",
        "delete_database",
        "read_file",
        "update_document",
        "transfer_funds",
        "post_message",
        "create_issue",
        "deploy_service",
    ]
    for action_type in types:
        request = submit(action_type, params={"x": 1})
        if request.state == State.PENDING_APPROVAL:
            services.reject(
                request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]), feedback="no"
            )
    page = login_as(people["bob"]).get("/history/").content.decode()
    form = page[page.index('id="f-action"') : page.index('id="f-risk"')]
    for action_type in types:
        assert f'<option value="{action_type}"' in form, action_type
    risks = page[page.index('id="f-risk"') : page.index("</select>", page.index('id="f-risk"'))]
    assert '<option value="prohibited"' in risks and '<option value="low"' in risks


def test_prohibited_finds_what_policy_refused(submit, people, login_as):
    refused = submit("delete_database", params={})
    assert refused.risk_level == "prohibited" and refused.state == State.REJECTED
    page = login_as(people["bob"]).get("/history/?risk=prohibited").content.decode()
    assert f"/requests/{refused.pk}/" in page
    assert "1 decided request" in page


def test_a_refused_request_gives_its_group_view_but_never_decide(submit, people):
    from approvals.permissions import decidable_by, with_view_grant

    refused = submit("delete_database", params={})
    assert with_view_grant(people["alice"]).filter(pk=refused.pk).exists()
    assert not decidable_by(people["alice"]).filter(pk=refused.pk).exists()


def test_filters_never_offer_what_the_person_may_not_see(submit, people, login_as):
    request = submit("send_email")
    services.reject(
        request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]), feedback="no"
    )
    page = login_as(people["mallory"]).get("/history/").content.decode()
    assert '<option value="send_email"' not in page and "mail-bot" not in page
