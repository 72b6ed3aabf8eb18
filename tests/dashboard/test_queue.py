"""The queue: what a reviewer sees, in which order, and at what cost."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import Kind, State
from approvals.web import queue_queries
from tests.fixtures.revisions import current_revision

QUEUE = reverse("approvals:queue")
SYNC = reverse("approvals:queue-sync")


def card_ids(response) -> list[str]:
    return [card.id for card in response.context["cards"]]


@pytest.fixture
def finance(admin_user, people) -> Group:
    """A second approver group with its own rule: carol alone sits in it."""
    group = Group.objects.create(name="finance")
    people["carol"].groups.add(group)
    policy.save_rule(
        {
            "name": "wire_finance",
            "priority": 4,
            "action_type": "wire_*",
            "risk_level": "high",
            "approver_group": "finance",
            "editable_params": ["amount"],
        },
        actor=Person(admin_user),
        note="finance approves wires",
    )
    return group


def test_a_reviewer_sees_only_pending_requests_routed_to_their_groups(client, people, submit, finance):
    email = submit("send_email")
    wire = submit("wire_money", params={"amount": 5})
    submit("read_file", params={"path": "/etc/motd"})  # low: auto-approved, never queued
    client.force_login(people["alice"])
    assert card_ids(client.get(QUEUE)) == [str(email.pk)]
    client.force_login(people["carol"])
    assert set(card_ids(client.get(QUEUE))) == {str(email.pk), str(wire.pk)}
    client.force_login(people["mallory"])
    assert card_ids(client.get(QUEUE)) == []


def test_most_urgent_first_is_highest_risk_then_nearest_deadline(client, people, submit, admin_user):
    """With every rule on the same TTL, a critical request submitted last still tops the
    queue (the seen bug: deadline-only order put it 14th of 14)."""
    policy.save_rule(
        {
            "name": "short_fuse",
            "priority": 3,
            "action_type": "page_oncall",
            "risk_level": "medium",
            "decision_ttl_seconds": 300,
        },
        actor=Person(admin_user),
        note="urgent pages",
    )
    policy.save_rule(
        {"name": "wire_critical", "priority": 4, "action_type": "wire_money", "risk_level": "critical"},
        actor=Person(admin_user),
        note="wires are critical",
    )
    now = timezone.now()
    with freeze_time(now):
        medium = submit("send_email")
    with freeze_time(now + timedelta(seconds=1)):
        high = submit(
            "send_email", params={"to": [f"p{i}@example.com" for i in range(12)], "subject": "s", "body": "b"}
        )
    with freeze_time(now + timedelta(seconds=2)):
        urgent = submit("page_oncall", params={})
    with freeze_time(now + timedelta(seconds=3)):
        critical = submit("wire_money", params={"amount": 5})
    client.force_login(people["alice"])
    by_urgency = [str(critical.pk), str(high.pk), str(urgent.pk), str(medium.pk)]
    assert card_ids(client.get(QUEUE)) == by_urgency
    assert card_ids(client.get(QUEUE, {"order": "urgency"})) == by_urgency
    assert card_ids(client.get(QUEUE, {"order": "deadline"})) == [
        str(urgent.pk),
        str(medium.pk),
        str(high.pk),
        str(critical.pk),
    ]
    assert card_ids(client.get(QUEUE, {"order": "age"})) == [
        str(medium.pk),
        str(high.pk),
        str(urgent.pk),
        str(critical.pk),
    ]
    assert card_ids(client.get(QUEUE, {"order": "<script>"})) == by_urgency  # unknown: the default
    assert [c["id"] for c in client.get(SYNC, {"order": "age"}).json()["cards"]] == card_ids(
        client.get(QUEUE, {"order": "age"})
    )
    html = client.get(QUEUE, {"order": "deadline"}).content.decode()
    assert "Nearest deadline first, then highest risk." in html and 'aria-current="true" data-order="deadline"' in html
    assert '<input type="hidden" name="order" value="deadline">' in html  # applying a filter keeps the order


def test_the_urgency_page_matches_the_whole_queue_order_across_levels(client, people, submit, admin_user, monkeypatch):
    """The page is read one level at a time; it must equal the first rows of the one-query order."""
    monkeypatch.setattr(queue_queries, "QUEUE_LIMIT", 3)
    policy.save_rule(
        {"name": "wire_critical", "priority": 4, "action_type": "wire_money", "risk_level": "critical"},
        actor=Person(admin_user),
        note="wires are critical",
    )
    for i in range(2):
        submit("send_email")
        submit("wire_money", params={"amount": i})
    alice = people["alice"]
    whole = [r.pk for r in queue_queries.queue(alice)]
    for limit in range(1, 6):
        assert [r.pk for r in queue_queries.queue_page(alice, limit=limit)] == whole[:limit]


def test_counts_describe_the_filtered_list_and_add_up(client, people, submit, finance):
    """The seen bug: with ?agent=... the total said 11 beside a breakdown adding to 19."""
    submit("send_email")
    submit("send_email", params={"to": [f"p{i}@example.com" for i in range(12)], "subject": "s", "body": "b"})
    submit("wire_money", params={"amount": 5})
    client.force_login(people["carol"])
    for query in (
        {},
        {"action_type": "send_email"},
        {"risk": "high"},
        {"action_type": "wire_money"},
        {"agent": "nobody"},
    ):
        response = client.get(QUEUE, query)
        counts = response.context["counts"]
        assert counts["total"] == sum(n for _, n, _ in counts["by_risk"]) == len(response.context["cards"])
        synced = client.get(SYNC, query).json()
        assert synced["count"] == counts["total"] and sum(synced["by_risk"].values()) == counts["total"]
        assert len(synced["cards"]) == counts["total"]
    by_risk = client.get(SYNC, {"action_type": "send_email"}).json()["by_risk"]
    assert by_risk == {"critical": 0, "high": 1, "medium": 1, "low": 0}
    # A risk link keeps the other filters.
    assert (
        'href="?action_type=send_email&amp;risk=high"'
        in client.get(QUEUE, {"action_type": "send_email"}).content.decode()
    )


def test_filters_narrow_the_queue_and_its_counts(client, people, submit, finance):
    email = submit("send_email")
    big = submit("send_email", params={"to": [f"p{i}@example.com" for i in range(12)], "subject": "s", "body": "b"})
    wire = submit("wire_money", params={"amount": 5})
    client.force_login(people["carol"])
    assert card_ids(client.get(QUEUE, {"risk": "high", "action_type": "send_email"})) == [str(big.pk)]
    assert card_ids(client.get(QUEUE, {"action_type": "wire_money"})) == [str(wire.pk)]
    assert card_ids(client.get(QUEUE, {"agent": "mail-bot", "risk": "medium"})) == [str(email.pk)]
    assert card_ids(client.get(QUEUE, {"expiring": "1"})) == []
    with freeze_time(timezone.now() + timedelta(minutes=50)):
        client.force_login(people["carol"])  # past the session's idle timeout
        assert len(card_ids(client.get(QUEUE, {"expiring": "1"}))) == 3
    response = client.get(QUEUE, {"risk": "high"})
    counts = response.context["counts"]
    assert counts["total"] == 2  # the counts describe the filtered list
    assert dict((level, n) for level, n, _ in counts["by_risk"]) == {"critical": 0, "high": 2, "medium": 0, "low": 0}
    assert counts["agents"] == ["mail-bot"] and counts["action_types"] == ["send_email", "wire_money"]
    assert "(2) Queue" in response.content.decode()
    assert client.get(QUEUE).context["counts"]["total"] == 3


@pytest.mark.parametrize("query", [{"risk": "spicy"}, {"state": "pending"}, {"kind": "poem", "agent": "mail-bot"}])
def test_a_filter_value_no_request_can_hold_shows_nothing_and_never_fails(client, people, submit, query):
    submit("send_email")
    rejected = submit("send_email")
    services.reject(rejected.pk, revision=current_revision(rejected.pk), actor=services.Person(people["bob"]))
    client.force_login(people["alice"])
    assert card_ids(client.get(QUEUE, query)) == []
    assert client.get(SYNC, query).json() == {
        "count": 0,
        "cards": [],
        "expiring": 0,
        "more": False,
        "by_risk": {"critical": 0, "high": 0, "medium": 0, "low": 0},
    }
    assert list(client.get(reverse("approvals:history"), query).context["page"].object_list) == []


def test_a_request_past_its_deadline_leaves_the_queue_before_the_sweeper_runs(client, people, submit):
    submit("send_email")
    client.force_login(people["alice"])
    with freeze_time(timezone.now() + timedelta(hours=2)):
        client.force_login(people["alice"])  # past the session's idle timeout
        assert card_ids(client.get(QUEUE)) == []
    assert ApprovalRequest.objects.get().state == State.PENDING_APPROVAL


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


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


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


def test_counts_past_the_cap_say_so_instead_of_counting_everything(client, people, submit, finance, monkeypatch):
    monkeypatch.setattr(queue_queries, "COUNT_CAP", 2)
    for _ in range(3):
        submit("send_email")
    submit("send_email", params={"to": [f"p{i}@example.com" for i in range(12)], "subject": "s", "body": "b"})
    submit("wire_money", params={"amount": 5})
    client.force_login(people["carol"])
    response = client.get(QUEUE)
    counts = response.context["counts"]
    assert counts["capped"] and counts["total"] == "2+"
    assert dict((level, n) for level, n, _ in counts["by_risk"]) == {"critical": 0, "high": 2, "medium": "2+", "low": 0}
    html = response.content.decode()
    assert '<span id="queue-count">2+</span>' in html and "(2+)" not in html
    assert client.get(SYNC).json()["count"] == "2+"
    assert client.get(SYNC, {"action_type": "wire_money"}).json()["count"] == 1


def test_filter_choices_come_from_the_most_urgent_requests(client, people, submit, finance, monkeypatch):
    monkeypatch.setattr(queue_queries, "COUNT_CAP", 2)
    now = timezone.now()
    with freeze_time(now):
        submit("send_email")
    with freeze_time(now + timedelta(minutes=5)):
        submit("wire_money", params={"amount": 5})
    with freeze_time(now + timedelta(minutes=10)):
        submit("transfer_funds", params={"amount": 1})
    client.force_login(people["carol"])
    counts = client.get(QUEUE).context["counts"]
    assert counts["action_types"] == ["send_email", "wire_money"]  # from the COUNT_CAP nearest deadlines
    assert counts["expiring"] == 0
    deadlines = sorted(ApprovalRequest.objects.values_list("decide_by", flat=True))
    with freeze_time(deadlines[0] - timedelta(minutes=1)):  # all three within EXPIRING_SOON, none past
        assert deadlines[-1] - deadlines[0] < queue_queries.EXPIRING_SOON
        client.force_login(people["carol"])  # past the session's idle timeout
        assert client.get(QUEUE).context["counts"]["expiring"] == "2+"
    response = client.get(QUEUE, {"action_type": "transfer_funds"})
    assert len(response.context["cards"]) == 1  # filtering by a type outside the choices still works
    assert 'value="transfer_funds" selected' in response.content.decode()


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


LEVELS = ["critical", "high", "medium", "low"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.tuples(st.sampled_from(LEVELS), st.integers(1, 4), st.integers(0, 3)), min_size=6, max_size=6),
    order=st.sampled_from(["urgency", "deadline", "age"]),
    limit=st.integers(1, 7),
)
def test_every_order_is_its_spec_and_a_page_is_the_head_of_the_whole_queue(people, six_requests, shape, order, limit):
    """Urgency: risk, then deadline, then age; deadline: deadline, then risk; age: oldest
    first. Ties in deadline and age are common (same TTL, same second), so they vary too."""
    start = timezone.now()
    with rolled_back():
        for request, (level, minutes_left, minutes_old) in zip(six_requests, shape):
            ApprovalRequest.objects.filter(pk=request.pk).update(
                risk_level=level,
                decide_by=start + timedelta(minutes=minutes_left * 10),
                created_at=start - timedelta(minutes=minutes_old),
            )
        rows = list(ApprovalRequest.objects.filter(pk__in=[r.pk for r in six_requests]))
        spec = {
            "urgency": lambda r: (LEVELS.index(r.risk_level), r.decide_by, r.created_at, r.pk),
            "deadline": lambda r: (r.decide_by, LEVELS.index(r.risk_level), r.created_at, r.pk),
            "age": lambda r: (r.created_at, LEVELS.index(r.risk_level), r.decide_by, r.pk),
        }[order]
        expected = [r.pk for r in sorted(rows, key=spec)]
        alice = people["alice"]
        assert [r.pk for r in queue_queries.queue(alice, order=order, now=start)] == expected
        assert [r.pk for r in queue_queries.queue_page(alice, order=order, limit=limit, now=start)] == expected[:limit]


@pytest.fixture
def six_requests(submit) -> list[ApprovalRequest]:
    return [submit("send_email") for _ in range(6)]


class _Rollback(Exception):
    pass


@contextmanager
def rolled_back():
    """Undo what the block wrote: each hypothesis example starts from the same rows."""
    try:
        with transaction.atomic():
            yield
            raise _Rollback
    except _Rollback:
        pass
