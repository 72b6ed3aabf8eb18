"""The queue's cards: what a reviewer decides on (params, quorum progress, a revised plan's
feedback and diff, edits across revisions, more time and edit only where they can work), at a
constant number of queries for the queue and its sync, and the pages beside it (a card's
fragment, the history).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.urls import reverse

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import Kind
from approvals.web import queue_queries
from tests.fixtures.revisions import current_revision

from .queue_story import QUEUE, SYNC, _queries


def test_a_card_shows_what_a_reviewer_decides_on(client, people, submit):
    request = submit(
        "send_email", params={"to": ["dana@example.com"], "subject": "Quarterly numbers", "body": "SECRET-BODY-TEXT"}
    )
    client.force_login(people["alice"])
    html = client.get(QUEUE).content.decode()
    assert "mail-bot" in html and "on behalf of" in html and "rita" in html
    assert "send_email" in html and "Quarterly numbers" in html and "dana@example.com" in html
    assert "SECRET-BODY-TEXT" not in html  # masked by the seeded rule
    assert "send_email_default" in html and "action type &#x27;send_email&#x27; matches" in html
    assert "0 of 1 approval" in html
    assert f'datetime="{request.decide_by.isoformat()}"' in html
    assert html.count("submitted") >= 1 and "queued" in html  # the audit history


def test_quorum_progress_and_an_unreachable_quorum_say_so(client, people, submit, two_person_rule, admin_user):
    transfer = submit("transfer_funds", params={"amount": 100})
    services.approve(transfer.pk, revision=current_revision(transfer.pk), actor=services.Person(people["alice"]))
    client.force_login(people["bob"])
    html = client.get(QUEUE).content.decode()
    assert "1 of 2 approvals" in html and "(alice)" in html
    policy.save_rule(
        {
            **{
                "name": "three_person",
                "priority": 2,
                "action_type": "nuke_*",
                "risk_level": "critical",
                "required_approvals": 9,
            }
        },
        actor=Person(admin_user),
        note="more than we have",
    )
    submit("nuke_cluster", params={})
    html = client.get(QUEUE).content.decode()
    assert "Quorum unreachable" in html


def test_a_revised_plan_shows_the_feedback_and_the_diff(client, people, agent):
    first = services.submit(
        services.Submission(
            kind=Kind.PLAN,
            plan_path="plans/x.md",
            plan_title="Plan X",
            plan_markdown="# X\n\n1. step one\n2. step two\n",
        ),
        agent=agent,
    )
    services.reject(
        first.pk,
        revision=current_revision(first.pk),
        actor=services.Person(people["alice"]),
        feedback="Add a rollback step.",
    )
    services.submit(
        services.Submission(
            kind=Kind.PLAN,
            plan_path="plans/x.md",
            plan_title="Plan X",
            supersedes=first,
            plan_markdown="# X\n\n1. step one\n2. step two\n3. rollback\n",
        ),
        agent=agent,
    )
    client.force_login(people["bob"])
    html = client.get(QUEUE).content.decode()
    assert "Revised after alice's feedback" in html and "Add a rollback step." in html
    assert '<span class="diff-add">+ 3. rollback</span>' in html
    assert "<h1>X</h1>" in html  # the plan itself, rendered


def test_approve_with_edits_shows_the_param_diff_across_revisions(client, people, submit, two_person_rule):
    transfer = submit("transfer_funds", params={"amount": 100, "memo": "invoice"})
    services.approve_with_edits(
        transfer.pk,
        revision=current_revision(transfer.pk),
        actor=services.Person(people["alice"]),
        edits={"amount": 90},
    )
    client.force_login(people["bob"])
    html = client.get(QUEUE).content.decode()
    assert "Parameter edits" in html
    assert '<td class="diff-del">100</td><td class="diff-add">90</td>' in html
    assert "Revision 2" in html and "1 of 2 approvals" in html


def test_queue_and_sync_cost_a_constant_number_of_queries(
    client, people, submit, finance, two_person_rule, django_assert_max_num_queries
):
    ops = Group.objects.create(name="ops")
    people["carol"].groups.add(ops)
    client.force_login(people["carol"])
    for i in range(4):
        submit("send_email")
        submit("wire_money", params={"amount": i})
        submit("transfer_funds", params={"amount": i})
    few_queue, few_sync = _queries(client, QUEUE), _queries(client, SYNC)
    for i in range(100):
        submit("send_email")
        submit("wire_money", params={"amount": i})
        request = submit("transfer_funds", params={"amount": i})
        if i % 3 == 0:
            services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
    assert ApprovalRequest.objects.pending().count() == 312
    with django_assert_max_num_queries(few_queue):
        response = client.get(QUEUE)
    assert len(response.context["cards"]) == queue_queries.QUEUE_LIMIT and response.context["counts"]["total"] == 312
    with django_assert_max_num_queries(few_sync):
        assert client.get(SYNC).json()["count"] == 312


def test_sync_lists_cards_in_queue_order_with_versions_that_change_on_a_vote(client, people, submit, two_person_rule):
    transfer = submit("transfer_funds", params={"amount": 1})
    client.force_login(people["bob"])
    before = client.get(SYNC).json()
    assert before["count"] == 1 and before["cards"][0]["id"] == str(transfer.pk)
    services.approve(transfer.pk, revision=current_revision(transfer.pk), actor=services.Person(people["alice"]))
    after = client.get(SYNC).json()
    assert after["cards"][0]["version"] != before["cards"][0]["version"]


def test_a_card_fragment_is_served_only_while_it_belongs_in_the_queue(client, people, submit):
    request = submit("send_email")
    url = reverse("approvals:card", args=[request.pk])
    client.force_login(people["alice"])
    response = client.get(url)
    assert response.status_code == 200 and f'id="card-{request.pk}"' in response.content.decode()
    assert client.get(url, {"risk": "high"}).status_code == 204
    client.force_login(people["mallory"])
    assert client.get(url).status_code == 204
    services.reject(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
    client.force_login(people["alice"])
    assert client.get(url).status_code == 204


def test_history_lists_decided_requests_with_filters(client, people, submit):
    rejected = submit("send_email")
    services.reject(
        rejected.pk,
        revision=current_revision(rejected.pk),
        actor=services.Person(people["bob"]),
        feedback="Wrong recipient",
    )
    submit("send_email")  # still pending: not history
    client.force_login(people["alice"])
    response = client.get(reverse("approvals:history"))
    assert [r.pk for r in response.context["page"].object_list] == [rejected.pk]
    html = response.content.decode()
    assert "Rejected" in html and "Wrong recipient" in html and "bob" in html
    assert list(client.get(reverse("approvals:history"), {"risk": "high"}).context["page"].object_list) == []


def test_pages_need_a_login(client):
    for url in (QUEUE, SYNC, reverse("approvals:history")):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


def test_a_card_offers_more_time_and_edit_only_where_they_can_work(
    client, people, submit, admin_user, django_assert_max_num_queries
):
    """The seen bug: "More time" on every card, and it always failed."""
    from approvals.notifications.dispatch import save_settings

    email = submit("send_email")
    wire = submit("wire_money", params={"amount": 5})
    client.force_login(people["alice"])
    html = client.get(QUEUE).content.decode()
    assert "More time" not in html  # no rule allows an extension yet

    save_settings(email.rule_name, actor=Person(admin_user), max_extension_seconds=1800)
    with django_assert_max_num_queries(30):
        page = client.get(QUEUE)
    shown = {card.id: card for card in page.context["cards"]}
    assert [seconds for seconds, _ in shown[str(email.pk)].extension_choices] == [900]  # within the 30 min limit
    html = page.content.decode()
    assert f'id="extend-{email.pk}"' in html and f'id="extend-{wire.pk}"' not in html

    services.extend_decision_deadline(email.pk, actor=services.Person(people["alice"]), seconds=900)
    assert f'id="extend-{email.pk}"' not in client.get(QUEUE).content.decode()  # the one extension is used

    editable = {card.id: card.may_edit for card in client.get(QUEUE).context["cards"]}
    assert editable[str(email.pk)] == bool(shown[str(email.pk)].editable_params)
    client.force_login(people["rita"])  # the person the action is for cannot approve: no Edit & approve
    assert not any(card.may_edit for card in client.get(QUEUE).context["cards"])


def test_the_triage_row_shows_hostile_target_text_inert(client, people, submit):
    hostile = submit("send_email", target={"mailbox": '<img src=x onerror="alert(1)">'})
    client.force_login(people["alice"])
    html = client.get(QUEUE).content.decode()
    row = html[html.index(f'id="row-{hostile.pk}"') :]
    row = row[: row.index("</li>")]
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in row and "<img" not in row
