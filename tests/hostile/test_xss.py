"""XSS payloads through every field an agent or a reviewer controls that reaches a
page: action type, target, params, plan title/path/Markdown, feedback and the
agent's name. Each page shows them as text: a browser parsing the HTML builds no
element or event handler from them.

Submissions go through the services directly (not the API) so even values the
API's validation would refuse are tried against the templates.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from agents.models import Agent
from approvals import errors, policy, services
from approvals.errors import DomainError
from approvals.models import PolicyVersion
from approvals.people import Person
from approvals.permissions import AUDITORS
from approvals.states import Kind
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

MARK = "xss-probe"
PAYLOADS = [
    f'<script>alert("{MARK}")</script>',
    f'"><img src=x onerror=alert("{MARK}")>',
    f"'><svg onload=alert('{MARK}')>",
    f"javascript:alert('{MARK}')",
    f'</textarea></script><iframe src="javascript:alert(`{MARK}`)">',
    f"{{{{ '{MARK}' }}}}<b>{MARK}</b>",
]
PAYLOAD = "".join(PAYLOADS)
SHORT_PAYLOAD = PAYLOADS[0] + PAYLOADS[1]  # for the 100- and 200-character columns (agent name, action type)


class Page(HTMLParser):
    """What a browser would build: elements, their attributes, and inline script text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def assert_escaped(html: str, where: str, *, shows_payload: bool = True) -> None:
    page = Page()
    page.feed(html)
    for tag, attrs in page.elements:
        assert tag not in {"img", "svg", "iframe", "b"} or MARK not in str(attrs), (where, tag, attrs)
        for name, value in attrs.items():
            assert not (name.startswith("on") and value and MARK in value), (where, tag, attrs)
            assert not (value and MARK in value and value.strip().lower().startswith("javascript:")), (where, attrs)
    assert not any(MARK in script for script in page.scripts), where
    if shows_payload:  # the payloads did reach the page, as text (so the checks above were not vacuous)
        assert MARK in "".join(page.text), f"{where}: the payload never reached the page"


def latest_version() -> int:
    return PolicyVersion.objects.order_by("-number").values_list("number", flat=True).first()


@pytest.fixture
def hostile_requests(people, reviewing_risk_admin):
    """A pending action, a pending plan and a rejected action, all full of payloads."""
    evil_agent = Agent.objects.create(name=f"bot {SHORT_PAYLOAD}", owner=people["owen"])
    policy.save_rule(
        {"name": "all_need_review", "priority": 1, "action_type": "*", "risk_level": "high", "conditions": []},
        actor=Person(reviewing_risk_admin),
        note=PAYLOAD,
    )
    with pytest.raises(DomainError) as refused:  # markup never gets into an action type at all
        services.submit(services.Submission(kind=Kind.ACTION, action_type=f"send_{SHORT_PAYLOAD}"), agent=evil_agent)
    assert refused.value.code == errors.INVALID_ACTION_TYPE
    action = services.submit(
        services.Submission(
            kind=Kind.ACTION,
            action_type="send_probe",
            target={"to": PAYLOAD, PAYLOAD: 1},
            params={"subject": PAYLOAD, "body": PAYLOAD, PAYLOAD: [PAYLOAD]},
            reason=PAYLOAD,
            context={
                "links": [
                    {"label": PAYLOAD, "url": f"javascript:alert('{MARK}')"},
                    {"label": PAYLOAD, "url": f"https://example.com/?q={PAYLOAD}"},
                ],
                "turns": [{"role": PAYLOAD, "text": PAYLOAD}],
            },
        ),
        agent=evil_agent,
    )
    plan = services.submit(
        services.Submission(
            kind=Kind.PLAN,
            plan_path=f"plans/{PAYLOAD}.md",
            plan_title=PAYLOAD,
            plan_markdown=f"# {PAYLOAD}\n\n{PAYLOAD}\n\n[x](javascript:alert('{MARK}'))",
        ),
        agent=evil_agent,
    )
    # Two calls of one step: the queue shows them as a batch group, whose header and pane
    # carry the agent's own batch and run ids (at most 200 characters, as the API allows).
    batched = [
        services.submit(
            services.Submission(
                kind=Kind.ACTION,
                action_type="send_probe",
                params={"subject": PAYLOAD},
                batch_id=SHORT_PAYLOAD,
                run_id=SHORT_PAYLOAD,
            ),
            agent=evil_agent,
        )
        for _ in range(2)
    ]
    rejected = services.submit(
        services.Submission(
            kind=Kind.ACTION, action_type="update_document", target={"doc": PAYLOAD}, params={"text": PAYLOAD}
        ),
        agent=evil_agent,
    )
    services.reject(
        rejected.pk, revision=current_revision(rejected.pk), actor=services.Person(people["bob"]), feedback=PAYLOAD
    )
    return {"action": action, "plan": plan, "rejected": rejected, "batched": batched[0]}


def test_payloads_render_escaped_on_every_page(hostile_requests, reviewing_risk_admin):
    reviewing_risk_admin.groups.add(Group.objects.get(name=AUDITORS))  # one viewer who may open every page
    client = Client()
    client.force_login(reviewing_risk_admin)
    pages = {
        "queue": "/",
        "history": "/history/",
        "action card": f"/requests/{hostile_requests['action'].pk}/card/",
        "plan card": f"/requests/{hostile_requests['plan'].pk}/card/",
        "batch group": f"/requests/{hostile_requests['batched'].pk}/batch/",
        "action page": f"/requests/{hostile_requests['action'].pk}/",
        "plan page": f"/requests/{hostile_requests['plan'].pk}/",
        "rejected page": f"/requests/{hostile_requests['rejected'].pk}/",
        "audit log": "/audit/",
        "audit timeline": f"/audit/requests/{hostile_requests['rejected'].pk}/",
        "rule history": "/rules/history/",
        "policy version": f"/rules/history/{latest_version()}/",
        "rules": "/rules/",  # rule fields are validated names and globs: no payload can get here
        "rule editor": "/rules/all_need_review/edit/",
        "metrics": "/rules/metrics/",
    }
    for where, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, (where, response.status_code)
        assert_escaped(response.content.decode(), where, shows_payload=where not in {"rules", "rule editor", "metrics"})
