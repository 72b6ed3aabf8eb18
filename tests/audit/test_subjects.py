"""audit.subjects: the pages learn agents' names and what a request is now from the apps
that own those rows, through the lookups they registered (the audit app imports no app)."""

from __future__ import annotations

import datetime as dt
import uuid
from types import SimpleNamespace

import pytest

from audit import subjects
from audit.chain import Actor, record

from .test_pages import REFUND, agent_cells, client_for

NOW = dt.datetime(2026, 12, 4, 9, 30, tzinfo=dt.UTC)


@pytest.fixture
def nothing_registered(monkeypatch) -> None:
    """As if no installed app named agents or described requests."""
    monkeypatch.setattr(subjects, "_agent_names", None)
    monkeypatch.setattr(subjects, "_request_summary", None)


@pytest.fixture
def refund_submitted(system) -> None:
    record("request.submitted", actor=Actor.for_agent(SimpleNamespace(pk=7, name="refund-bot")), request=REFUND)
    record("request.expired", actor=system, request=SimpleNamespace(pk=uuid.uuid4(), agent_id=41))


@pytest.mark.django_db
def test_the_registered_lookups_name_agents_and_describe_requests(nothing_registered, refund_submitted, auditor_ann):
    subjects.register_agent_names(lambda ids: {agent_id: f"named-{agent_id}" for agent_id in ids if agent_id == 41})
    subjects.register_request_summary(
        lambda request_id: (
            {
                "id": request_id,
                "kind": "action",
                "action_type": "refund_order",
                "state": "pending_approval",
                "risk_level": "high",
                "rule_name": "refunds",
                "created_at": NOW,
                "agent__name": "refunds-v2",
            }
            if request_id == REFUND.pk
            else None
        )
    )
    assert sorted(agent_cells(client_for(auditor_ann).get("/audit/"))) == ["named-41", "refund-bot"]
    page = client_for(auditor_ann).get(f"/audit/requests/{REFUND.pk}/").content.decode()
    assert "<code>refund_order</code> by refunds-v2" in page
    assert "high (rule refunds)" in page and "<dd>pending_approval</dd>" in page


@pytest.mark.django_db
def test_with_nothing_registered_the_pages_show_what_the_rows_hold(nothing_registered, refund_submitted, auditor_ann):
    assert sorted(agent_cells(client_for(auditor_ann).get("/audit/"))) == ["agent #41", "refund-bot"]
    page = client_for(auditor_ann).get(f"/audit/requests/{REFUND.pk}/")
    assert page.status_code == 200 and b"deleted; the audit events remain" in page.content
    assert client_for(auditor_ann).get(f"/audit/requests/{uuid.uuid4()}/").status_code == 404


def test_nothing_is_looked_up_for_no_agents(nothing_registered):
    calls: list[object] = []
    subjects.register_agent_names(lambda ids: calls.append(ids) or {})
    assert subjects.agent_names(set()) == {} and calls == []
