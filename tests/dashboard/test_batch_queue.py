"""A batch on the queue: calls an agent submitted together (one interrupt, several
tool calls) show as one group, placed by its most urgent member, whole even where
the page cut would split it, and decided one by one or all at once, each member with
its own decision, audit row and refusal."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.models import Agent
from approvals import services
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.states import State
from approvals.web import queue_queries
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision

QUEUE = reverse("approvals:queue")
SYNC = reverse("approvals:queue-sync")
DECIDE = reverse("approvals:decide-batch")
MANY = {"to": [f"p{i}@example.com" for i in range(12)], "subject": "Price change", "body": "Monday."}


def row_ids(response) -> list[str]:
    """The triage list as rendered: group headers ("batch-...") and request rows, in order."""
    html = response.content.decode()
    return [
        chunk.split('"', 1)[0]
        for chunk in html.split('class="queue-row')[1:]
        for chunk in [chunk.split('data-id="', 1)[1]]
    ]


def in_steps(submit, calls):
    """Submit `calls` (action type, params, overrides) one second apart, oldest first."""
    now = timezone.now()
    made = []
    for i, (action_type, params, overrides) in enumerate(calls):
        with freeze_time(now + timedelta(seconds=i)):
            made.append(submit(action_type, params=params, **overrides))
    return made


def test_a_batch_shows_as_one_group_at_its_most_urgent_members_place(client, people, submit):
    alone_high, first, alone_medium, urgent, last = in_steps(
        submit,
        [
            ("send_email", MANY, {}),
            ("send_email", None, {"batch_id": "step-1", "run_id": "run-42"}),
            ("send_email", None, {}),
            ("send_email", MANY, {"batch_id": "step-1", "run_id": "run-42"}),  # high: the group's most urgent
            ("send_email", None, {"batch_id": "step-1", "run_id": "run-42"}),
        ],
    )
    client.force_login(people["alice"])
    response = client.get(QUEUE)
    (group,) = [entry for entry in response.context["entries"] if entry.is_group]
    assert [card.id for card in group.members] == [str(urgent.pk), str(first.pk), str(last.pk)]
    assert group.risk_level == "high" and group.decide_by == min(r.decide_by for r in (first, urgent, last))
    assert row_ids(response) == [
        str(alone_high.pk),
        group.id,
        str(urgent.pk),
        str(first.pk),
        str(last.pk),
        str(alone_medium.pk),
    ]
    html = response.content.decode()
    assert "3 calls from run run-42 · batch step-1" in html
    assert html.count(f'data-group="{group.id}"') == 3  # each member row says it belongs (indented)


def test_the_sync_lists_the_group_before_its_members_with_the_groups_own_url(client, people, submit):
    a, b = (submit("send_email", batch_id="step-2") for _ in range(2))
    client.force_login(people["alice"])
    entries = client.get(SYNC).json()["cards"]
    head, *members = entries
    assert head["id"].startswith("batch-") and head["url"] == reverse("approvals:batch-card", args=[a.pk])
    assert [(m["id"], m["group"]) for m in members] == [(str(a.pk), head["id"]), (str(b.pk), head["id"])]
    fragment = client.get(head["url"])
    assert fragment.status_code == 200 and fragment["X-Card-Version"] == head["version"]
    assert f'id="card-{head["id"]}"' in fragment.content.decode()
    # One decided one by one: one left is a plain row again, and the group's fragment is gone.
    services.approve(a.pk, revision=current_revision(a.pk), actor=Person(people["bob"]))
    after = client.get(SYNC).json()["cards"]
    assert [(e["id"], e.get("group")) for e in after] == [(str(b.pk), "")]
    assert client.get(head["url"]).status_code == 204


def test_a_batch_the_page_cut_would_split_stays_whole(people, submit):
    """Four single requests and a batch of three whose members sort first, fifth and
    last: a page of four shows all three members, then the most urgent single one
    (the members pulled forward push the least urgent off the page, never a member)."""
    calls = (
        [("send_email", MANY, {"batch_id": "cut"})]
        + [("send_email", None, {})] * 3
        + [
            ("send_email", None, {"batch_id": "cut"}),
            ("send_email", None, {}),
            ("send_email", None, {"batch_id": "cut"}),
        ]
    )
    made = in_steps(submit, calls)
    page = queue_queries.queue_page(people["alice"], limit=4)
    assert [r.pk for r in page] == [made[0].pk, made[4].pk, made[6].pk, made[1].pk]
    assert [r.pk for r in queue_queries.queue_page(people["alice"], limit=2)] == [made[0].pk, made[4].pk, made[6].pk]
    for order in queue_queries.ORDERS:
        ids = [r.pk for r in queue_queries.queue_page(people["alice"], order=order, limit=4)]
        at = [ids.index(pk) for pk in (made[0].pk, made[4].pk, made[6].pk)]
        assert max(at) - min(at) == 2, f"{order}: the batch's members are side by side"


def test_another_agent_reusing_a_batch_id_is_never_in_the_group(client, people, submit):
    rival = Agent.objects.create(name="rival-bot", owner=people["owen"])
    mine = [submit("send_email", batch_id="same") for _ in range(2)]
    theirs = submit("send_email", batch_id="same", agent=rival)
    client.force_login(people["alice"])
    (group,) = [e for e in client.get(QUEUE).context["entries"] if e.is_group]
    assert {card.id for card in group.members} == {str(r.pk) for r in mine}
    assert str(theirs.pk) not in {card.id for card in group.members}


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_batches_keep_the_queue_at_a_constant_number_of_queries(client, people, submit, django_assert_max_num_queries):
    client.force_login(people["alice"])
    for _ in range(3):
        submit("send_email", batch_id="small")
    few_queue, few_sync = _queries(client, QUEUE), _queries(client, SYNC)
    for step in range(40):
        for _ in range(3):
            submit("send_email", batch_id=f"step-{step}")
    # The page is full now and cuts a batch: one more query brings its rest, however many there are.
    with django_assert_max_num_queries(few_queue + 1):
        response = client.get(QUEUE)
    groups = [e for e in response.context["entries"] if e.is_group]
    assert groups and all(len(g.members) == 3 for g in groups)
    with django_assert_max_num_queries(few_sync + 1):
        client.get(SYNC)
    head = client.get(SYNC).json()["cards"][0]
    with django_assert_max_num_queries(few_queue):
        assert client.get(head["url"]).status_code == 200


# --- Deciding a whole batch ---------------------------------------------------------------


def decide(client, requests, *, decision="approve", **fields):
    body = {"decision": decision, "request": [f"{r.pk}:{r.current_revision}" for r in requests], **fields}
    return client.post(DECIDE, body, HTTP_ACCEPT="application/json")


def test_approve_all_records_one_decision_and_one_audit_row_per_member(client, people, submit):
    batch = [submit("send_email", batch_id="all") for _ in range(3)]
    client.force_login(people["alice"])
    answer = decide(client, batch)
    assert answer.status_code == 200
    assert [(r["id"], r["ok"], r["state"]) for r in answer.json()["results"]] == [
        (str(r.pk), True, State.APPROVED) for r in batch
    ]
    for request in batch:
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED
        assert Decision.objects.filter(request=request, reviewer=people["alice"], verdict="approve").count() == 1
        assert AuditEvent.objects.filter(request_id=request.pk, verb="decision.recorded").count() == 1


def test_reject_all_sends_the_feedback_to_every_member(client, people, submit):
    batch = [submit("send_email", batch_id="no") for _ in range(2)]
    client.force_login(people["alice"])
    answer = decide(client, batch, decision="reject", feedback="Not today.")
    assert answer.json()["message"] == "2 of 2 rejected."
    for request in batch:
        request.refresh_from_db()
        assert request.state == State.REJECTED and request.feedback == "Not today."


def test_the_core_refuses_per_request_and_decides_the_rest(client, people, submit):
    """Separation of duties, a host that cannot take an approval, a revision the
    reviewer did not see: each refused on its own, with its code; the others decided."""
    fine = submit("send_email", batch_id="mixed")
    for_alice = submit("send_email", batch_id="mixed", requested_for=people["alice"])
    reply_only = submit("ask_user", params={"q": "?"}, batch_id="mixed", allowed_decisions=["respond"])
    moved = submit("send_email", batch_id="mixed")
    client.force_login(people["alice"])
    body = {
        "decision": "approve",
        "request": [f"{fine.pk}:1", f"{for_alice.pk}:1", f"{reply_only.pk}:1", f"{moved.pk}:2"],
    }
    results = {r["id"]: r for r in client.post(DECIDE, body, HTTP_ACCEPT="application/json").json()["results"]}
    assert results[str(fine.pk)]["ok"]
    assert results[str(for_alice.pk)]["code"] == "separation_of_duties"
    assert results[str(reply_only.pk)]["code"] == "decision_not_allowed"
    assert results[str(moved.pk)]["code"] == "revision_changed"
    assert [ApprovalRequest.objects.get(pk=r.pk).state for r in (fine, for_alice, reply_only, moved)] == [
        State.APPROVED
    ] + [State.PENDING_APPROVAL] * 3
    assert Decision.objects.count() == 1


def test_one_password_covers_the_batch_and_a_missing_one_refuses_only_the_critical(
    client, people, submit, critical_wires
):
    email, wire = submit("send_email", batch_id="mix"), submit("wire_money", params={"amount": 5}, batch_id="mix")
    client.force_login(people["alice"])
    results = {r["id"]: r for r in decide(client, [email, wire]).json()["results"]}
    assert results[str(email.pk)]["ok"] and results[str(wire.pk)]["code"] == "step_up_required"
    other_wire = submit("wire_money", params={"amount": 6}, batch_id="mix")
    results = decide(client, [wire, other_wire], password="alice-pw-123!").json()["results"]
    assert [r["ok"] for r in results] == [True, True]
    assert set(Decision.objects.filter(request__in=[wire, other_wire]).values_list("step_up_method", flat=True)) == {
        "password"
    }


def test_a_request_outside_the_reviewers_queue_reads_as_missing(client, people, submit):
    mine = submit("send_email", batch_id="x")
    client.force_login(people["mallory"])
    (result,) = decide(client, [mine]).json()["results"]
    assert result["code"] == "not_found"
    assert ApprovalRequest.objects.get(pk=mine.pk).state == State.PENDING_APPROVAL


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(decision=st.text(max_size=10), requests=st.lists(st.text(max_size=60), max_size=4))
def test_any_malformed_batch_is_one_coded_refusal_never_a_500(client, people, decision, requests):
    client.force_login(people["alice"])
    answer = client.post(DECIDE, {"decision": decision, "request": requests}, HTTP_ACCEPT="application/json")
    assert answer.status_code in (200, 400, 422)  # 400: text the edge refuses (NUL, lone surrogates)
    body = answer.json()
    if answer.status_code != 200:
        assert body["code"] in ("validation_error", "invalid_input", "revision_required") and body["message"]
    else:
        assert all(r["code"] == "not_found" for r in body["results"])


def test_the_no_script_form_returns_to_the_queue_with_the_outcome(client, people, submit):
    batch = [submit("send_email", batch_id="plain") for _ in range(2)]
    client.force_login(people["alice"])
    answer = client.post(DECIDE, {"decision": "approve", "request": [f"{r.pk}:1" for r in batch], "next": "/"})
    assert answer.status_code == 302 and answer["Location"] == "/"
    assert all(ApprovalRequest.objects.get(pk=r.pk).state == State.APPROVED for r in batch)


def test_the_card_links_to_its_request_page(client, people, submit):
    request = submit("send_email")
    client.force_login(people["alice"])
    assert f'href="{reverse("approvals:request", args=[request.pk])}"' in client.get(QUEUE).content.decode()


def test_an_agents_batch_and_run_ids_are_shown_inert(client, people, submit):
    hostile = '<img src=x onerror="alert(1)">'
    for _ in range(2):
        submit("send_email", batch_id=hostile, run_id=hostile + "</code><script>x()</script>")
    client.force_login(people["alice"])
    html = client.get(QUEUE).content.decode()
    head = client.get(SYNC).json()["cards"][0]
    fragment = client.get(head["url"]).content.decode()
    for page in (html, fragment):
        assert "<img src=x" not in page and "<script>x()" not in page
        assert "&lt;img src=x onerror=" in page
    assert head["id"].startswith("batch-") and "<" not in head["id"]  # element ids never carry the agent's text


def test_a_batch_decision_without_the_csrf_token_is_refused(browser_client, people, submit):
    batch = [submit("send_email", batch_id="csrf") for _ in range(2)]
    browser_client.force_login(people["alice"])
    answer = browser_client.post(
        DECIDE, {"decision": "approve", "request": [f"{r.pk}:1" for r in batch]}, HTTP_ACCEPT="application/json"
    )
    assert answer.status_code == 403
    assert not Decision.objects.exists()


def test_a_batch_of_more_than_the_group_limit_is_refused_whole(client, people, submit):
    client.force_login(people["alice"])
    import uuid

    many = [f"{uuid.uuid4()}:1" for _ in range(queue_queries.GROUP_LIMIT + 1)]
    answer = client.post(DECIDE, {"decision": "approve", "request": many}, HTTP_ACCEPT="application/json")
    assert answer.status_code == 422 and answer.json()["code"] == "validation_error"


def test_the_first_25_note_comes_with_every_sync(client, people, submit):
    client.force_login(people["alice"])
    for _ in range(queue_queries.QUEUE_LIMIT):
        submit("send_email")
    assert client.get(SYNC).json()["more"] is False
    assert '<span id="shown-note" hidden>' in client.get(QUEUE).content.decode()
    submit("send_email")
    assert client.get(SYNC).json()["more"] is True  # the page un-hides the note from this
    assert (
        '<span id="shown-note">Showing the first <span id="shown-limit">25</span>.'
        in client.get(QUEUE).content.decode()
    )
