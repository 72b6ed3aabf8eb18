"""The queue: which requests a reviewer sees, in which order (most urgent first: highest risk,
then nearest deadline, the same on every page as in the whole queue), and the filters and
counts that describe it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State
from approvals.web import queue_queries
from tests.fixtures.revisions import current_revision

from .queue_story import QUEUE, SYNC, card_ids, rolled_back


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
        "shown": queue_queries.QUEUE_LIMIT,
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
