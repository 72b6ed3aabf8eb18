"""The auditors' pages: who may see and export what, filters, keyset paging,
event detail, request timeline, chain status, and constant query counts."""

from __future__ import annotations

import json
import re
import uuid
from types import SimpleNamespace

import pytest
from django.test import Client

from audit.chain import Actor, audited_atomic, record
from audit.verification import run_verification

from .exporting import download

REFUND = SimpleNamespace(pk=uuid.UUID("6f1c1f52-4c7e-4d59-9d3a-1f2e3d4c5b6a"), agent_id=7)
PAGES = ["/audit/", "/audit/events/1/", f"/audit/requests/{REFUND.pk}/"]
EXPORTS = ["/audit/export.csv", "/audit/export.jsonl"]


@pytest.fixture
def refund_story(alice, system) -> None:
    bot = SimpleNamespace(pk=7, name="refund-bot")
    record("request.submitted", actor=Actor.for_agent(bot), request=REFUND)
    record(
        "request.queued",
        actor=system,
        request=REFUND,
        metadata={"risk_level": "high", "rule": "refunds", "to": "pending_approval"},
    )
    record("decision.recorded", actor=Actor.for_user(alice), request=REFUND, metadata={"verdict": "approve"})
    record("request.approved", actor=Actor.for_user(alice), request=REFUND, metadata={"to": "approved"})
    record("request.execution_claimed", actor=Actor.for_agent(bot), request=REFUND, metadata={"to": "executing"})
    record("request.succeeded", actor=Actor.for_agent(bot), request=REFUND, metadata={"to": "succeeded"})


def many_events(count: int) -> None:
    with audited_atomic():
        for index in range(count):
            record("policy.changed", actor=Actor.system(), metadata={"n": index})


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def manifest_url(export_id: str = "00000000-0000-0000-0000-000000000000") -> str:
    return f"/audit/export.csv.manifest?export_id={export_id}"


# --- Permissions: every page and endpoint ------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("page", PAGES)
def test_auditors_read_every_page(refund_story, auditor_ann, page):
    assert client_for(auditor_ann).get(page).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("page", PAGES)
def test_anonymous_visitors_are_sent_to_sign_in(refund_story, page):
    response = Client().get(page)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["reviewer", "mallory"])
@pytest.mark.parametrize("page", PAGES)
def test_reviewers_and_others_cannot_read_the_log(refund_story, request, who, page):
    assert client_for(request.getfixturevalue(who)).get(page).status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("url", [*EXPORTS, manifest_url()])
def test_reviewers_others_anonymous_and_agents_cannot_export(refund_story, reviewer, mallory, url):
    for user, headers, code in [
        (reviewer, {}, "permission_denied"),
        (mallory, {}, "permission_denied"),
        (None, {}, "not_authenticated"),
        (None, {"Authorization": "Bearer cp_agent_token_of_refund_bot"}, "not_authenticated"),
    ]:
        response, body = download(user, url, **headers)
        assert response.status_code == (401 if code == "not_authenticated" else 403), (user, url)
        assert json.loads(body)["code"] == code
    from audit.models import AuditEvent

    assert not AuditEvent.objects.filter(verb="audit.exported").exists()


@pytest.mark.django_db
def test_a_user_with_view_but_not_export_sees_the_log_without_export_links(refund_story, django_user_model):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("vic", password="unused-password-5")
    viewer.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    response = client_for(viewer).get("/audit/")
    assert response.status_code == 200
    assert b'id="export-csv"' not in response.content
    assert download(viewer, EXPORTS[0])[0].status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_nobody_edits_or_deletes_through_any_audit_url(refund_story, auditor_ann, django_user_model, method):
    superuser = django_user_model.objects.create_superuser("root", password="unused-password-6")
    for user in (auditor_ann, superuser):
        client = client_for(user)
        for url in [*PAGES, *EXPORTS, manifest_url()]:
            response = getattr(client, method)(url)
            assert response.status_code == 405, (user, method, url)
    from audit.models import AuditEvent

    assert AuditEvent.objects.count() == 6


# --- The log page --------------------------------------------------------------------------------


def seqs_on(response) -> list[int]:
    return [int(seq) for seq in re.findall(rb'<tr data-seq="(\d+)"', response.content)]


@pytest.mark.django_db
def test_the_log_filters_by_verb_actor_and_risk(refund_story, auditor_ann):
    client = client_for(auditor_ann)
    assert seqs_on(client.get("/audit/")) == [6, 5, 4, 3, 2, 1]
    assert seqs_on(client.get("/audit/?verb=decision.recorded")) == [3]
    assert seqs_on(client.get("/audit/?actor=alice")) == [4, 3]
    assert seqs_on(client.get("/audit/?risk=high&rule=refunds")) == [6, 5, 4, 3, 2, 1]
    assert seqs_on(client.get("/audit/?risk=low")) == []


@pytest.mark.django_db
def test_a_bad_filter_is_explained_not_a_crash(refund_story, auditor_ann):
    response = client_for(auditor_ann).get("/audit/?since=someday")
    assert response.status_code == 400
    assert b"since must be an ISO-8601 date" in response.content


@pytest.mark.django_db
def test_export_links_carry_the_filters(refund_story, auditor_ann):
    response = client_for(auditor_ann).get("/audit/?verb=request.approved&actor=alice")
    assert b'href="/audit/export.jsonl?verb=request.approved&amp;actor=alice"' in response.content


@pytest.mark.django_db
def test_keyset_pages_walk_the_whole_log_without_offsets(auditor_ann):
    many_events(120)
    client = client_for(auditor_ann)
    seen, url = [], "/audit/"
    while url:
        response = client.get(url)
        seen += seqs_on(response)
        match = re.search(rb'href="(\?[^"]*before=\d+)" rel="next"', response.content)
        url = "/audit/" + match.group(1).decode().replace("&amp;", "&") if match else ""
    assert seen == list(range(120, 0, -1))
    newer = client.get("/audit/?after=50")
    assert seqs_on(newer) == list(range(100, 50, -1))


LOG_PAGE_QUERIES = 10  # session, user, permissions (2), nav groups, events, status, exports, savepoints


@pytest.mark.django_db
def test_the_log_page_query_count_is_constant(auditor_ann, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(auditor_ann)
    many_events(10)
    run_verification()
    with CaptureQueriesContext(connection) as small:
        client.get("/audit/?risk=high")
    many_events(1000)
    download(auditor_ann, "/audit/export.csv")
    with django_assert_max_num_queries(LOG_PAGE_QUERIES) as large:
        response = client.get("/audit/?risk=high")
    assert response.status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries)
    with django_assert_max_num_queries(LOG_PAGE_QUERIES):
        assert len(seqs_on(client.get("/audit/"))) == 50


# --- Detail, timeline, status --------------------------------------------------------------------


@pytest.mark.django_db
def test_the_event_page_shows_the_canonical_text_and_that_its_hash_recomputes(refund_story, auditor_ann):
    response = client_for(auditor_ann).get("/audit/events/3/")
    assert b"decision.recorded" in response.content
    assert b'id="hash-check" class="chain-ok">yes' in response.content
    assert client_for(auditor_ann).get("/audit/events/999/").status_code == 404


@pytest.mark.django_db
def test_the_request_timeline_joins_decision_and_execution_events(refund_story, auditor_ann):
    response = client_for(auditor_ann).get(f"/audit/requests/{REFUND.pk}/")
    phases = re.findall(rb'class="timeline-item phase-(\w+)" data-seq="(\d+)"', response.content)
    assert [(phase.decode(), int(seq)) for phase, seq in phases] == [
        ("submission", 1),
        ("classification", 2),
        ("decision", 3),
        ("decision", 4),
        ("execution", 5),
        ("execution", 6),
    ]
    assert b"deleted; the audit events remain" in response.content
    assert client_for(auditor_ann).get(f"/audit/requests/{uuid.uuid4()}/").status_code == 404


@pytest.mark.django_db
def test_the_status_panel_shows_the_last_verification(refund_story, auditor_ann):
    client = client_for(auditor_ann)
    assert b"Not verified yet" in client.get("/audit/").content
    run_verification()
    page = client.get("/audit/").content.decode()
    assert "Intact" in page
    assert re.search(r"<dt>Last verified seq</dt><dd>6</dd>", page)
    assert "Latest signed checkpoint: seq 6" in page


@pytest.mark.django_db
def test_the_status_panel_shows_the_signing_key_to_pin(refund_story, auditor_ann, settings):
    from audit.signing import SigningKey

    client = Client()
    client.force_login(auditor_ann)
    page = client.get("/audit/").content.decode()
    key = SigningKey.from_secret(settings.AUDIT_SIGNING_KEY)
    assert key.public_text in page and key.key_id in page


# --- Names, not ids ------------------------------------------------------------------------------


def agent_cells(response) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r'<td class="agent-cell">(.*?)</td>', response.content.decode(), re.S)
    ]


@pytest.mark.django_db
def test_the_log_names_the_agent_it_acted_under_not_its_number(refund_story, auditor_ann):
    cells = agent_cells(client_for(auditor_ann).get("/audit/"))
    assert cells and set(cells) == {"refund-bot"}


@pytest.mark.django_db
def test_an_agent_renamed_since_shows_under_its_current_name(refund_story, auditor_ann, django_user_model):
    from django.apps import apps

    apps.get_model("agents", "Agent").objects.create(pk=REFUND.agent_id, name="refunds-v2")
    page = client_for(auditor_ann).get("/audit/")
    assert set(agent_cells(page)) == {"refunds-v2"}
    assert f'href="?agent={REFUND.agent_id}"' in page.content.decode()


@pytest.mark.django_db
def test_an_agent_seen_only_on_others_rows_is_named_by_its_number(auditor_ann, system):
    record("request.expired", actor=system, request=SimpleNamespace(pk=uuid.uuid4(), agent_id=41))
    assert agent_cells(client_for(auditor_ann).get("/audit/")) == ["agent #41"]


@pytest.mark.django_db
def test_the_event_page_names_the_agent(refund_story, auditor_ann):
    page = client_for(auditor_ann).get("/audit/events/1/").content.decode()
    assert "refund-bot" in page and "(id 7)" in page


@pytest.mark.django_db
def test_naming_agents_costs_one_query_however_many_agents_a_page_shows(auditor_ann, django_assert_max_num_queries):
    from django.apps import apps

    Agent = apps.get_model("agents", "Agent")
    client = client_for(auditor_ann)

    def events_by(count: int) -> None:
        with audited_atomic():
            for index in range(count):
                bot = Agent.objects.create(name=f"bot-{count}-{index}")
                record(
                    "request.submitted",
                    actor=Actor.for_agent(bot),
                    request=SimpleNamespace(pk=uuid.uuid4(), agent_id=bot.pk),
                )

    events_by(1)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one:
        client.get("/audit/")
    events_by(40)
    with django_assert_max_num_queries(len(one.captured_queries)):
        page = client.get("/audit/")
    assert len(set(agent_cells(page))) == 41
