"""Masked means masked everywhere (DESIGN.md; issue 22, item 4).

A risk-admin's rule tester used to hand a masked value back in `conditions[].actual`
when the probe rule masked nothing, and its `matches` answered guesses about the
rest, on any request, decided or not, unaudited. Now which params are masked comes
from the request's own classification, a probe that reads one by value needs reveal
permission on that request (and is audited), and dry-runs read masked values blind.

The canary at the end seeds one request with a unique random string and a number in
masked params, drives every surface that shows requests to people, and asserts that
neither value nor its keyed audit digest appears in any answer. A new surface (Slack,
summaries) joins by adding one entry to `SURFACES`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals import policy, services
from approvals.masking import MASK
from approvals.models import ApprovalRequest
from approvals.notifications import dispatch
from approvals.notifications.channels import email_text
from approvals.people import Person
from approvals.permissions import RISK_ADMINS
from approvals.policy.rules.impact import compute_impact
from approvals.policy.tuning import editing
from approvals.states import State
from audit.chain import digest
from audit.models import AuditEvent
from controlplane.routing import websocket_application
from tests.audit.exporting import download
from tests.fixtures.revisions import current_revision
from tests.sockets import open_socket

pytestmark = pytest.mark.django_db

# The rule that classifies the canary: body and amount masked, two approvals (so an
# edit and a vote leave it pending), subject and body editable.
MASKED_MAIL = {
    "name": "masked_mail",
    "priority": 1,
    "action_type": "send_email",
    "risk_level": "high",
    "required_approvals": 2,
    "masked_params": ["body", "amount"],
    "editable_params": ["subject", "body"],
    "conditions": [],
}
# A probe that masks nothing and tests the masked body: the attack.
PROBE = {
    "name": "probe",
    "priority": 2,
    "action_type": "send_email",
    "risk_level": "medium",
    "masked_params": [],
    "conditions": [{"path": "params.body", "op": "matches", "value": "^s"}],
}


@dataclass
class Canary:
    """A unique random string and a number, and everything that must never carry them."""

    text: str = field(default_factory=lambda: f"canary{secrets.token_hex(12)}")
    number: int = field(default_factory=lambda: 100_000_000 + secrets.randbelow(800_000_000))
    edited: str = field(default_factory=lambda: f"canary{secrets.token_hex(12)}")

    @property
    def needles(self) -> dict[str, str]:
        """What must not appear: each value, a truncated prefix of the strings, and the
        keyed digest (audit.privacy's HMAC) of each value."""
        found = {
            "text": self.text,
            "text prefix": self.text[:16],
            "number": str(self.number),
            "edited": self.edited,
            "edited prefix": self.edited[:16],
        }
        for name, value in (("text", self.text), ("number", self.number), ("edited", self.edited)):
            found[f"{name} digest"] = digest(value)["hmac"]
        return found

    def assert_absent(self, surface: str, text: str) -> None:
        leaked = [name for name, needle in self.needles.items() if needle in text]
        assert not leaked, f"{surface} leaks the masked {', '.join(leaked)}"


def _user(name: str, *groups: str):
    user = get_user_model().objects.create_user(name, password=f"{name}-pw-123!", email=f"{name}@example.com")
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


@pytest.fixture
def masked_rule(risk_admin):
    return policy.save_rule(MASKED_MAIL, actor=Person(risk_admin), note="mail bodies and amounts are masked")


@pytest.fixture
def canary() -> Canary:
    return Canary()


@pytest.fixture
def seeded(canary, masked_rule, submit) -> ApprovalRequest:
    """The canary request, pending: body and amount masked."""
    request = submit(
        "send_email", {"to": ["dana@example.com"], "subject": "Quarterly", "body": canary.text, "amount": canary.number}
    )
    assert request.state == State.PENDING_APPROVAL and set(request.classification["masked_params"]) == {
        "body",
        "amount",
    }
    return request


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post_json(client: Client, url: str, payload: dict):
    return client.post(url, data=json.dumps(payload), content_type="application/json", HTTP_ACCEPT="application/json")


def _probe_reveals(request) -> int:
    return AuditEvent.objects.filter(
        request_id=request.pk, verb__in=("rules.masked_probe", "request.field_revealed")
    ).count()


# --- The attack: the rule tester on a real request ----------------------------------------------------------


def test_a_probe_on_a_masked_param_is_refused_to_a_risk_admin_and_nothing_is_revealed(seeded, canary, risk_admin):
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": PROBE, "request_id": str(seeded.pk)})

    assert response.status_code == 403
    assert response.json()["code"] == "masked_probe_refused"
    assert response.json()["details"]["fields"] == ["params.body"]
    canary.assert_absent("the refused probe", response.content.decode())
    assert "matches" not in response.json() and "rule_matches" not in response.json()  # no oracle either
    assert _probe_reveals(seeded) == 0


@pytest.mark.parametrize(
    "condition",
    [
        {"path": "params.body", "op": "eq", "value": "x"},
        {"path": "params.body", "op": "contains", "value": "canary"},
        {"path": "params.body", "op": "len_gt", "value": 3},
        {"path": "params.body", "op": "in", "value": ["a", "b"]},
        {"path": "params.amount", "op": "gt", "value": 5},
        {"path": "impact.amount", "op": "gte", "value": 1},  # the amount fact copies the masked amount
    ],
)
def test_every_operator_that_could_be_an_oracle_is_refused(seeded, risk_admin, condition):
    probe = {**PROBE, "conditions": [condition]}
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(seeded.pk)})
    assert response.status_code == 403 and response.json()["code"] == "masked_probe_refused"


def test_a_probe_that_masks_the_param_itself_is_refused_too(seeded, risk_admin):
    """The request's classification decides what is masked, not the probe's own list."""
    probe = {**PROBE, "masked_params": ["body"]}
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(seeded.pk)})
    assert response.status_code == 403 and response.json()["code"] == "masked_probe_refused"


def test_a_probe_on_a_decided_request_is_refused_even_to_a_decider(seeded, canary, risk_admin, people):
    risk_admin.groups.add(Group.objects.get(name="reviewers"))  # ada may decide it...
    services.reject(seeded.pk, actor=Person(people["alice"]), feedback="no", revision=1)  # ...but it is decided

    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": PROBE, "request_id": str(seeded.pk)})

    assert response.status_code == 403 and response.json()["code"] == "masked_probe_refused"
    canary.assert_absent("the refused probe", response.content.decode())
    assert _probe_reveals(seeded) == 0


def test_a_tester_who_may_reveal_gets_the_probe_and_it_is_audited_naming_the_field(seeded, canary, risk_admin):
    risk_admin.groups.add(Group.objects.get(name="reviewers"))  # ada may decide the pending request

    probe = {**PROBE, "conditions": [{"path": "params.body", "op": "matches", "value": "^canary[0-9a-f]+$"}]}
    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(seeded.pk)})

    assert response.status_code == 200
    result = response.json()
    assert result["conditions"][0]["held"] is True  # the real value was read (the mask would not match)
    assert result["rule_matches"] is True and result["read_blind"] == []
    assert result["conditions"][0]["actual"] == MASK  # still shown only as masked
    canary.assert_absent("the permitted probe", response.content.decode())
    event = AuditEvent.objects.get(request_id=seeded.pk, verb="rules.masked_probe")
    assert event.actor_label == "ada"
    assert event.metadata["fields"] == ["params.body"]
    canary.assert_absent("the probe's audit event", json.dumps(event.metadata))


def test_without_a_probe_on_a_masked_path_the_tester_reads_masked_values_blind(seeded, canary, risk_admin):
    """The rest of the policy (including a rule that admin applied at once, stricter
    ones need no second pair of eyes) reads the masked body as the mask: the answer is
    the same whatever the body says."""
    policy.save_rule(
        {
            "name": "stricter_oracle",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "prohibited",
            "masked_params": [],
            "conditions": [{"path": "params.body", "op": "contains", "value": canary.text[:10]}],
        },
        actor=Person(risk_admin),
        note="a stricter rule applies at once",
    )
    innocent = {**PROBE, "conditions": [{"path": "params.subject", "op": "eq", "value": "Quarterly"}]}

    response = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": innocent, "request_id": str(seeded.pk)})

    assert response.status_code == 200
    result = response.json()
    assert result["conditions"][0]["held"] is True  # unmasked params are read as they are
    assert result["classification"]["risk_level"] != "prohibited"  # the oracle rule read the mask, not the body
    assert "params.body" in result["read_blind"]
    assert result["impact"]["amount"] == MASK
    canary.assert_absent("the blind test", response.content.decode())
    assert _probe_reveals(seeded) == 0


def test_a_dry_run_over_real_requests_is_no_oracle_for_a_masked_value(seeded, canary, risk_admin):
    """The same report whether the guess is right or wrong."""

    def report(guess: str) -> dict:
        rule = {
            "name": "guess",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "critical",
            "conditions": [{"path": "params.body", "op": "eq", "value": guess}],
        }
        response = _post_json(_client(risk_admin), reverse("rules:dry-run"), {"rule": rule})
        assert response.status_code == 200
        canary.assert_absent("the dry-run", response.content.decode())
        return {key: value for key, value in response.json().items() if key not in ("window_start", "window_end")}

    assert report(canary.text) == report("wrong guess")


def test_an_edit_refused_by_policy_names_no_masked_value(seeded, canary, risk_admin, people):
    """A prohibited rule (applied at once: it is stricter) that reads the masked body:
    the refusal explains itself with the body masked."""
    policy.save_rule(
        {
            "name": "no_quarterly",
            "priority": 0,
            "action_type": "send_email",
            "risk_level": "prohibited",
            "masked_params": [],
            "match": "all",
            "conditions": [
                {"path": "params.subject", "op": "eq", "value": "Refused"},
                {"path": "params.body", "op": "contains", "value": "canary"},
            ],
        },
        actor=Person(risk_admin),
        note="stricter",
    )
    client = APIClient()
    client.force_login(people["alice"])
    response = client.post(
        f"/api/v1/requests/{seeded.pk}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"subject": "Refused"}},
        format="json",
    )

    assert response.status_code == 422 and response.json()["code"] == "edit_prohibited"
    assert MASK in response.json()["message"]
    canary.assert_absent("the edit refusal", response.content.decode())


# --- The canary: every surface, driven by people who did not reveal anything ---------------------------------


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


# --- No oracle: whatever the masked value, the blind answer is the same --------------------------------------

_VALUES = st.one_of(st.text(max_size=30), st.integers(), st.lists(st.text(max_size=5), max_size=3), st.booleans())
_CONDITIONS = st.sampled_from(
    [
        {"path": "params.body", "op": "matches", "value": "^a"},
        {"path": "params.body", "op": "eq", "value": "a"},
        {"path": "params.body", "op": "len_gt", "value": 4},
        {"path": "params.body", "op": "contains", "value": "a"},
        {"path": "params.body", "op": "gt", "value": 10},
        {"path": "params.body", "op": "in", "value": ["a", 1]},
        {"path": "impact.amount", "op": "gt", "value": 10},
    ]
)


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_VALUES, second=_VALUES, condition=_CONDITIONS)
def test_a_blind_rule_test_answers_the_same_whatever_the_masked_value(masked_rule, first, second, condition):
    """The tester's blind evaluation (what anyone without reveal permission gets) is
    a function of what they may see: two requests differing only in a masked value get
    the same answer, explanation and impact included."""
    rule = {**PROBE, "conditions": [condition]}

    def answer(body, amount):
        sample = {"action_type": "send_email", "params": {"to": ["a@example.com"], "body": body, "amount": amount}}
        return editing.try_rule(rule, sample, masked={"body", "amount"}).to_dict()

    # Coarse facts a fixed detector reads off the whole call (sensitive data found or
    # not) are what reviewers decide on and may differ; hold them equal.
    assume(_coarse(first) == _coarse(second))
    assert answer(first, 5) == answer(second, 7)


def _coarse(body) -> tuple:
    impact = compute_impact("send_email", {"to": ["a@example.com"], "body": body})
    return impact["sensitive"], tuple(impact["sensitive_kinds"]), tuple(impact["unknown"])


def test_the_amount_fact_is_masked_only_where_it_may_copy_a_masked_param(risk_admin, submit, people):
    """A payment whose memo is masked still shows its amount (and may be tested on it);
    one whose amount is masked shows neither."""
    for name, masked in (("memo_masked", ["memo"]), ("amount_masked", ["amount"])):
        policy.save_rule(
            {
                "name": name,
                "priority": 1,
                "action_type": f"pay_{name}",
                "risk_level": "high",
                "masked_params": masked,
                "conditions": [],
            },
            actor=Person(risk_admin),
            note="masks",
        )
    memo = submit("pay_memo_masked", {"amount": 1234, "memo": "secret memo"})
    amount = submit("pay_amount_masked", {"amount": 98765, "memo": "visible memo"})
    alice = APIClient()
    alice.force_login(people["alice"])

    assert alice.get(f"/api/v1/requests/{memo.pk}/").json()["impact"]["amount"] == "1234"
    assert alice.get(f"/api/v1/requests/{amount.pk}/").json()["impact"]["amount"] == MASK
    probe = {**PROBE, "action_type": "pay_*", "conditions": [{"path": "impact.amount", "op": "gt", "value": 1000}]}
    allowed = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(memo.pk)})
    assert allowed.status_code == 200 and allowed.json()["conditions"][0]["held"] is True
    refused = _post_json(_client(risk_admin), reverse("rules:test"), {"rule": probe, "request_id": str(amount.pk)})
    assert refused.status_code == 403 and refused.json()["code"] == "masked_probe_refused"
    assert "98765" not in refused.content.decode()
