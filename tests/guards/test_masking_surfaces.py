"""Masked means masked on every surface (DESIGN.md; issue 22, item 4).

The canary seeds one request with a unique random string and a number in masked params,
drives every surface that shows requests to people, and asserts that neither value nor its
keyed audit digest appears in any answer. A new surface (Slack, summaries) joins by adding one
entry to `SURFACES`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import policy, services
from approvals.notifications import dispatch
from approvals.notifications.channels import email_text
from approvals.people import Person
from approvals.permissions import RISK_ADMINS
from approvals.states import State
from controlplane.routing import websocket_application
from tests.audit.exporting import download
from tests.fixtures.revisions import current_revision
from tests.sockets import open_socket

from .masking_canary import PROBE, _client, _post_json, _probe_reveals, _user

pytestmark = pytest.mark.django_db


@pytest.fixture
def stage(seeded, canary, people, risk_admin):
    """The canary request after an edit of its masked body (bob) and an approval
    (alice), still pending; ann the auditor; ben a second risk-admin."""
    bob = APIClient()
    bob.force_login(people["bob"])
    edited = bob.post(
        f"/api/v1/requests/{seeded.pk}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"body": canary.edited}},
        format="json",
    )
    assert edited.status_code == 200, edited.content
    seeded.refresh_from_db()
    assert seeded.state == State.PENDING_APPROVAL and seeded.current_revision == 2
    return {
        "request": seeded,
        "people": people,
        "risk_admin": risk_admin,
        "auditor": _user("ann", "auditors"),
        "ben": _user("ben", RISK_ADMINS),
    }


def _get(user, url: str, **query) -> str:
    response = _client(user).get(url, query)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def _queue_page(stage) -> str:
    return _get(stage["people"]["carol"], reverse("approvals:queue"))


def _card_fragment(stage) -> str:
    return _get(stage["people"]["carol"], reverse("approvals:card", args=[stage["request"].pk]))


def _request_page(stage) -> str:
    page = _get(stage["people"]["carol"], reverse("approvals:request", args=[stage["request"].pk]))
    return page + _get(stage["auditor"], reverse("approvals:request", args=[stage["request"].pk]))


def _queue_sync(stage) -> str:
    return _get(stage["people"]["carol"], reverse("approvals:queue-sync"))


def _reviewer_api(stage) -> str:
    pk = stage["request"].pk
    return _get(stage["people"]["carol"], "/api/v1/requests/") + _get(
        stage["people"]["carol"], f"/api/v1/requests/{pk}/"
    )


def _rule_tester(stage) -> str:
    innocent = {
        **PROBE,
        "conditions": [
            {"path": "impact.recipient_count", "op": "gt", "value": 0},
            {"path": "params.body", "op": "exists", "value": True},
        ],
    }
    response = _post_json(
        _client(stage["risk_admin"]), reverse("rules:test"), {"rule": innocent, "request_id": str(stage["request"].pk)}
    )
    assert response.status_code == 200
    current = _post_json(_client(stage["risk_admin"]), reverse("rules:test"), {"request_id": str(stage["request"].pk)})
    refused = _post_json(
        _client(stage["risk_admin"]), reverse("rules:test"), {"rule": PROBE, "request_id": str(stage["request"].pk)}
    )
    assert refused.status_code == 403
    samples = _get(stage["risk_admin"], reverse("rules:samples"))
    return response.content.decode() + current.content.decode() + refused.content.decode() + samples


def _dry_run(stage) -> str:
    rule = {
        "name": "guess",
        "priority": 0,
        "action_type": "send_email",
        "risk_level": "critical",
        "conditions": [{"path": "params.body", "op": "len_gt", "value": 3}],
    }
    response = _post_json(_client(stage["risk_admin"]), reverse("rules:dry-run"), {"rule": rule})
    assert response.status_code == 200
    return response.content.decode()


def _proposal_page(stage) -> str:
    from approvals.models import PolicyProposal

    saved = _client(stage["risk_admin"]).post(
        reverse("rules:new"),
        {
            "rule_json": json.dumps(
                {
                    "name": "looser_mail",
                    "priority": 0,
                    "action_type": "send_email",
                    "risk_level": "low",
                    "conditions": [{"path": "params.body", "op": "len_gt", "value": 3}],
                }
            ),
            "note": "Loosen",
        },
    )
    assert saved.status_code in (302, 200)
    proposal = PolicyProposal.objects.order_by("-created_at").first()
    return _get(stage["ben"], reverse("rules:proposal", args=[proposal.pk])) if proposal else ""


def _metrics(stage) -> str:
    admin = stage["risk_admin"]
    return _get(admin, reverse("rules:metrics")) + "".join(
        _get(admin, reverse("rules:metrics-csv", args=[table]))
        for table in ("rule", "action_type", "agent", "reviewer", "daily")
    )


def _audit_exports(stage) -> str:
    auditor = stage["auditor"]
    exported = ""
    for url in (reverse("audit:export_jsonl"), reverse("audit:export_csv")):
        response, body = download(auditor, url)
        assert response.status_code == 200
        exported += body.decode()
    assert str(stage["request"].pk) in exported  # the request's events are there, only its values are not
    return exported + _get(auditor, reverse("audit:timeline", args=[stage["request"].pk]))


def _notifications(stage) -> str:
    sent = []
    for event in ("arrived", "reminder", "escalated"):
        payload = dispatch.build_payload(stage["request"], event)
        sent.append(json.dumps(payload, sort_keys=True, separators=(",", ":")))  # the webhook's body
        subject, body = email_text(payload)  # the email's
        sent += [subject, body]
    return "\n".join(sent)


def _errors(stage) -> str:
    pk = stage["request"].pk
    carol = APIClient()
    carol.force_login(stage["people"]["carol"])
    answers = [
        # an edit of a masked param the rule does not let reviewers edit, to the canary's own value
        carol.post(
            f"/api/v1/requests/{pk}/decisions/",
            {"decision": "approve", "revision": 2, "edits": {"amount": stage["canary"].number}},
            format="json",
        ),
        # a decision on a revision that moved on
        carol.post(f"/api/v1/requests/{pk}/decisions/", {"decision": "approve", "revision": 1}, format="json"),
        # a reveal of a param that is not masked, and of a masked one by someone who may not decide
        carol.post(f"/api/v1/requests/{pk}/reveal/", {"field": "subject"}, format="json"),
    ]
    mallory = APIClient()
    mallory.force_login(stage["people"]["mallory"])
    answers.append(mallory.post(f"/api/v1/requests/{pk}/reveal/", {"field": "body"}, format="json"))
    assert all(answer.status_code >= 400 for answer in answers), [a.status_code for a in answers]
    return "".join(answer.content.decode() for answer in answers)


def _once_decided(stage) -> str:
    """History, the request page and the API once the request is decided (nobody may
    reveal anything on it any more)."""
    pk = stage["request"].pk
    services.reject(pk, actor=Person(stage["people"]["carol"]), feedback="not this week", revision=2)
    carol = stage["people"]["carol"]
    return (
        _get(carol, reverse("approvals:history"))
        + _get(carol, reverse("approvals:request", args=[pk]))
        + _get(stage["auditor"], reverse("approvals:request", args=[pk]))
        + _get(carol, f"/api/v1/requests/{pk}/")
        + _get(stage["auditor"], reverse("audit:log"))
    )


def _django_admin(stage) -> str:
    root = get_user_model().objects.create_superuser("root", password="root-pw-123!")
    pk = stage["request"].pk
    return (
        _get(root, f"/admin/approvals/approvalrequest/{pk}/change/")
        + _get(root, "/admin/approvals/approvalrequest/")
        + _get(root, "/admin/audit/auditevent/")
    )


def _slack_messages(stage) -> str:
    """A Slack direct message of the request, pending and once decided (rendered as sent)."""
    import json

    from approvals.chat import slack

    request = stage["request"]
    shown = json.dumps(slack.blocks_for(request), ensure_ascii=False)
    shown += json.dumps(slack.feedback_modal(slack.button_value(str(request.pk), 2), ""), ensure_ascii=False)
    services.reject(request.pk, actor=Person(stage["people"]["carol"]), feedback="no", revision=2)
    request.refresh_from_db()
    return shown + json.dumps(slack.blocks_for(request), ensure_ascii=False)


# Every surface that shows a request to people. A new one joins with one entry.
SURFACES: list[tuple[str, Callable[[dict], str]]] = [
    ("queue page (cards)", _queue_page),
    ("card fragment", _card_fragment),
    ("request page", _request_page),
    ("queue sync JSON", _queue_sync),
    ("reviewer API list/detail", _reviewer_api),
    ("rule tester", _rule_tester),
    ("dry-run", _dry_run),
    ("proposals page", _proposal_page),
    ("metrics page and CSVs", _metrics),
    ("audit exports (JSONL, CSV) and timeline", _audit_exports),
    ("notifications (email, webhook)", _notifications),
    ("error answers", _errors),
    ("Django admin", _django_admin),
    ("Slack messages", _slack_messages),
    ("history, request page and API once decided", _once_decided),
]


@pytest.mark.parametrize("surface", [entry[1] for entry in SURFACES], ids=[entry[0] for entry in SURFACES])
def test_the_masking_canary_never_surfaces(stage, canary, settings, surface):
    settings.POLICY_FOUR_EYES = True  # the proposals page needs a change that waits
    stage["canary"] = canary
    shown = surface(stage)
    assert shown  # the surface answered something
    canary.assert_absent(surface.__name__, shown)
    # Nobody revealed anything, so nothing is audited as revealed.
    assert _probe_reveals(stage["request"]) == 0


def test_the_agent_sees_its_own_call_and_no_other_agent_does(seeded, canary, token):
    """Agents are not people: the agent that submitted the call already holds its
    params and reads them back as sent; another agent's token finds nothing."""
    from agents.models import Agent
    from agents.services import issue_token

    own = APIClient()
    own.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    detail = own.get(f"/api/v1/requests/{seeded.pk}/").json()
    assert detail["params"]["body"] == canary.text
    rival = Agent.objects.create(name="rival-bot", owner=get_user_model().objects.get(username="owen"))
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(rival).secret}")
    answer = other.get(f"/api/v1/requests/{seeded.pk}/")
    assert answer.status_code == 404
    canary.assert_absent("another agent's answer", answer.content.decode())


@pytest.mark.django_db(transaction=True)
def test_the_reviewer_socket_never_carries_a_masked_value(canary, masked_rule, submit, people):
    client = Client()
    client.force_login(people["carol"])
    cookie = f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"
    headers = [(b"origin", b"http://testserver"), (b"cookie", cookie.encode())]
    heard: list[str] = []

    async def scenario():
        async with open_socket(websocket_application, "/ws/reviewer/", headers=headers) as socket:
            request = await database_sync_to_async(submit)(
                "send_email", {"to": ["dana@example.com"], "subject": "Q", "body": canary.text, "amount": canary.number}
            )
            heard.append(json.dumps(await socket.receive_json_from(timeout=3)))
            await database_sync_to_async(services.approve_with_edits)(
                request.pk, actor=Person(people["bob"]), edits={"body": canary.edited}, revision=1
            )
            heard.append(json.dumps(await socket.receive_json_from(timeout=3)))

    async_to_sync(scenario)()
    assert heard
    canary.assert_absent("the reviewer socket", "\n".join(heard))


def test_an_edit_that_hands_the_request_to_a_rule_masking_less_keeps_it_masked(seeded, canary, risk_admin, people):
    """Masking follows the request, never shrinking: an edit re-routing it to a rule
    that masks nothing does not show the body to the new rule's group."""
    Group.objects.get_or_create(name="treasury")
    carol = get_user_model().objects.get(username="carol")
    carol.groups.add(Group.objects.get(name="treasury"))
    policy.save_rule(
        {
            "name": "urgent_mail",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "critical",
            "required_approvals": 2,
            "approver_group": "treasury",
            "masked_params": [],
            "conditions": [{"path": "params.subject", "op": "eq", "value": "URGENT"}],
        },
        actor=Person(risk_admin),
        note="urgent mail goes to treasury",
    )

    services.approve_with_edits(
        seeded.pk, actor=Person(people["alice"]), edits={"subject": "URGENT"}, revision=current_revision(seeded)
    )
    seeded.refresh_from_db()

    assert seeded.rule_name == "urgent_mail"
    assert {"body", "amount"} <= set(seeded.classification["masked_params"])
    page = _get(carol, reverse("approvals:card", args=[seeded.pk]))
    canary.assert_absent("the re-routed card", page)
