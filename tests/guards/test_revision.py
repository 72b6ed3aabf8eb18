"""A decision names what it decides (DESIGN.md "Guards live in the core": a decision
carries the revision it was made on, and a step-up proof binds exactly what it approves).

The story (issue 22, item 2): mail-bot, owned by owen, asks to wire 100. owen, whose own
approval can never count, proposes an edit to 9,999,999: the request becomes revision 2,
critical, treasury's to decide. vera (a reviewer and in treasury) still has revision 1
on her screen and sends her own edit made on it. Before, the edit was applied on top of
owen's 9,999,999 and approved there; now it is refused as stale (409 revision_changed)
on every path, and the request stays at owen's proposal with nothing approved.

A decision that names no revision is 422 `revision_required` on every kind (approve,
reject, approve with edits, a reply in place of the tool, a suspension's answer) and
every path (the JSON API, the dashboard's form and the page script's JSON, a batch).
The API also takes the revision as `If-Match` (the request's ETag).

A step-up proof (password, authenticator code, passkey) made for one edit or answer
decides nothing else: not another edit, not another answer, not the same request
approved as it stands.
"""

from __future__ import annotations

import inspect
import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals import errors, policy, services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.states import State
from tests.api.conftest import bearer

# Fixtures, used by name: the authenticator app's enrollment, the in-process identity provider.
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this module)
from tests.identity.conftest import enroll_totp, local_provider, nobody_required, sign_in, totp_code  # noqa: F401
from tests.identity.soft_passkey import SoftPasskey
from tests.identity.test_provider_step_up import back_from_the_provider, sso_alice, step_up_provider, to_the_provider  # noqa: F401
from tests.suspensions.conftest import APPROVAL_STEP

WIRE_LARGE = {
    "name": "wire_large",
    "priority": 1,
    "action_type": "wire",
    "risk_level": "critical",
    "required_approvals": 2,
    "approver_group": "treasury",
    "editable_params": ["amount", "to", "memo"],
    "conditions": [{"path": "params.amount", "op": "gt", "value": 1_000_000}],
}
WIRE = {
    "name": "wire",
    "priority": 2,
    "action_type": "wire",
    "risk_level": "medium",
    "required_approvals": 1,
    "approver_group": "reviewers",
    "editable_params": ["amount", "to", "memo"],
}
PAYROLL = {
    "name": "payroll_critical",
    "priority": 3,
    "action_type": "run_payroll",
    "risk_level": "critical",
    "editable_params": ["amount"],
}
CRITICAL_ANSWERS = {
    "name": "critical_answers",
    "priority": 3,
    "action_type": "approval-flow.*",
    "risk_level": "critical",
}
PATHS = ("api", "form", "keyboard")
JSON_ACCEPT = {"HTTP_ACCEPT": "application/json"}
CHALLENGES = "/api/v1/step-up/challenges/"


# Step-up failure counters and spent codes live in the cache (`fresh_counters`, autouse
# here), and no group requires a second factor at sign-in (`nobody_required`).
pytestmark = pytest.mark.usefixtures("nobody_required")


@pytest.fixture
def treasury_wire(submit, admin_user, treasurers):
    """`wire(amount)`: mail-bot asks to wire `amount`; over a million it is treasury's, critical."""
    policy.save_rules([WIRE_LARGE, WIRE], actor=Person(admin_user), note="wires: large ones are treasury's")

    def _wire(amount: int) -> ApprovalRequest:
        return submit(
            "wire", params={"amount": amount, "to": "acct-supplier", "memo": "invoice 42"}, target={"ledger": "main"}
        )

    return _wire


@pytest.fixture
def payroll(submit, admin_user):
    """A critical run_payroll (the amount editable): every approval needs a step-up."""
    policy.save_rule(PAYROLL, actor=Person(admin_user), note="payroll is critical")
    return lambda amount=100: submit("run_payroll", params={"amount": amount})


@dataclass
class Answer:
    status: int
    code: str | None
    messages: list[str]


class Path:
    """One way a signed-in person sends a decision: the JSON API, the dashboard's plain
    form (answered with a redirect and a message) or the page script's post of that
    form (answered in JSON)."""

    def __init__(self, name: str, user, host: str = "testserver") -> None:
        self.name = name
        self.client = APIClient(HTTP_HOST=host) if name == "api" else Client(HTTP_HOST=host)
        self.client.force_login(user)

    def send(
        self,
        request,
        decision: str,
        *,
        revision: int | None,
        edits: dict | None = None,
        message: str | None = None,
        answer: Any = None,
        password: str | None = None,
        feedback: str = "",
    ) -> Answer:
        """`revision` None: the decision names none."""
        if self.name == "api":
            body: dict[str, Any] = {"decision": decision, "feedback": feedback}
            if revision is not None:
                body["revision"] = revision
            if edits is not None:
                body["edits"] = edits
            if message is not None:
                body["message"] = message
            if answer is not None:
                body["resume_data"] = answer
            if password is not None:
                body["step_up"] = {"method": "password", "password": password}
            response = self.client.post(f"/api/v1/requests/{request.pk}/decisions/", body, format="json")
            return Answer(response.status_code, response.json().get("code"), [])
        view = {
            "approve": "approvals:approve-with-edits" if edits else "approvals:approve",
            "reject": "approvals:reject",
            "respond": "approvals:respond",
        }[decision]
        form = {
            f"edit:{key}": value if isinstance(value, str) else json.dumps(value)
            for key, value in (edits or {}).items()
        }
        form["feedback"] = feedback
        if revision is not None:
            form["revision"] = str(revision)
        if message is not None:
            form["message"] = message
        if answer is not None:
            form["resume_data"] = json.dumps(answer)
        if password is not None:
            form["password"] = password
        headers = JSON_ACCEPT if self.name == "keyboard" else {}
        response = self.client.post(reverse(view, args=[request.pk]), form, **headers)
        if self.name == "keyboard":
            return Answer(response.status_code, response.json().get("code"), [])
        return Answer(response.status_code, None, [str(m) for m in response.wsgi_request._messages])


@pytest.fixture(params=PATHS)
def revision_path(request, people, treasurers):
    """`path("vera")`: vera deciding through this test's path."""
    everyone = {**people, **treasurers}
    return lambda name: Path(request.param, everyone[name])


def assert_refused(answer: Answer, path_name: str, code: str, status: int, *, says: str) -> None:
    if path_name == "form":
        assert answer.status == 302 and any(says in m for m in answer.messages), answer
    else:
        assert (answer.status, answer.code) == (status, code), answer


def snapshot(request) -> tuple:
    """Everything a refused decision must leave as it was."""
    fresh = ApprovalRequest.objects.get(pk=request.pk)
    votes = list(Decision.objects.filter(request=fresh).values_list("reviewer__username", "revision", "verdict"))
    return fresh.state, fresh.current_revision, fresh.current_params(), votes


# --- The owner's proposal and the treasury member's stale edit ----------------------------------


def test_a_stale_edit_never_lands_on_the_owners_proposal(treasury_wire, revision_path, people):
    request = treasury_wire(100)
    proposed = services.approve_with_edits(
        request.pk, actor=Person(people["owen"]), revision=1, edits={"amount": 9_999_999}
    )
    assert (proposed.current_revision, proposed.risk_level, proposed.approver_group.name) == (2, "critical", "treasury")
    assert services.is_proposal(proposed, by=people["owen"])
    before = snapshot(request)

    vera = revision_path("vera")  # she looked at revision 1 (amount 100) and corrects its memo
    stale = vera.send(request, "approve", revision=1, edits={"memo": "invoice 42, checked"}, password="vera-pw-123!")

    assert_refused(stale, vera.name, errors.REVISION_CHANGED, 409, says="revision 2")
    assert (
        snapshot(request)
        == before
        == (State.PENDING_APPROVAL, 2, {"amount": 9_999_999, "to": "acct-supplier", "memo": "invoice 42"}, [])
    )


def test_a_stale_plain_approval_is_refused_too(treasury_wire, revision_path, people):
    request = treasury_wire(100)
    services.approve_with_edits(request.pk, actor=Person(people["owen"]), revision=1, edits={"amount": 9_999_999})
    before = snapshot(request)
    vera = revision_path("vera")
    assert_refused(
        vera.send(request, "approve", revision=1, password="vera-pw-123!"),
        vera.name,
        errors.REVISION_CHANGED,
        409,
        says="revision 2",
    )
    assert snapshot(request) == before


def test_on_the_revision_she_saw_the_edit_counts(treasury_wire, revision_path, people):
    """The check refuses only the stale: at revision 2 vera's edit is a new revision she approves."""
    request = treasury_wire(100)
    services.approve_with_edits(request.pk, actor=Person(people["owen"]), revision=1, edits={"amount": 9_999_999})
    vera = revision_path("vera")
    answer = vera.send(request, "approve", revision=2, edits={"amount": 5_000_000}, password="vera-pw-123!")
    assert answer.status in (200, 302), answer
    state, revision, params, votes = snapshot(request)
    assert (state, revision, params["amount"], votes) == (
        State.PENDING_APPROVAL,
        3,
        5_000_000,
        [("vera", 3, "approve")],
    )


# --- Every decision names its revision ----------------------------------------------------------


def test_every_decision_service_takes_the_revision_as_a_required_keyword():
    for decide in (
        services.approve,
        services.reject,
        services.approve_with_edits,
        services.respond_instead,
        services.respond_to_suspension,
    ):
        revision = inspect.signature(decide).parameters["revision"]
        assert (revision.kind, revision.default) == (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty), decide


@pytest.mark.parametrize("given", [None, 0, -1, True, "1", 1.0])
def test_a_service_call_without_a_revision_number_is_refused_before_anything_is_read(submit, people, given):
    request = submit("send_email")
    with pytest.raises(DomainError) as refused:
        services.approve(request.pk, actor=Person(people["alice"]), revision=given)
    assert (refused.value.code, refused.value.http_status) == (errors.REVISION_REQUIRED, 422)
    assert snapshot(request)[0] == State.PENDING_APPROVAL


@pytest.fixture
def every_kind(submit, treasury_wire, token):
    """One pending request of each decision kind: (decision, extra fields, request)."""
    agent_api = bearer(token)
    suspended = agent_api.post("/api/v1/suspensions/", APPROVAL_STEP, format="json")
    assert suspended.status_code == 201, suspended.json()
    return {
        "approve": ("approve", {}, submit("send_email")),
        "reject": ("reject", {"feedback": "no"}, submit("send_email")),
        "approve with edits": ("approve", {"edits": {"amount": 200}}, treasury_wire(100)),
        "reply instead": (
            "respond",
            {"message": "Use the shared outbox."},
            submit("ask_user", params={"q": "Which mailbox?"}, allowed_decisions=["respond"]),
        ),
        "suspension answer": (
            "respond",
            {"answer": {"approved": True}},
            ApprovalRequest.objects.get(pk=suspended.json()["id"]),
        ),
    }


def test_a_decision_without_a_revision_is_422_on_every_kind_and_path(every_kind, revision_path):
    alice = revision_path("alice")
    for kind, (decision, extra, request) in every_kind.items():
        before = snapshot(request)
        answer = alice.send(request, decision, revision=None, **extra)
        assert_refused(answer, alice.name, errors.REVISION_REQUIRED, 422, says="revision")
        assert snapshot(request) == before, kind


def test_with_its_revision_each_kind_is_decided(every_kind, revision_path):
    """The refusal above is the missing revision's, not the kind's."""
    alice = revision_path("alice")
    for kind, (decision, extra, request) in every_kind.items():
        answer = alice.send(request, decision, revision=1, **extra)
        assert answer.status in (200, 302) and not answer.code, (kind, answer)
        assert snapshot(request)[0] != State.PENDING_APPROVAL, kind


def test_a_batch_member_without_a_revision_refuses_the_batch_on_the_api(submit, people):
    first, second = submit("send_email"), submit("send_email")
    api = APIClient()
    api.force_login(people["alice"])
    response = api.post(
        "/api/v1/decisions/",
        {"decision": "approve", "requests": [{"id": str(first.pk), "revision": 1}, {"id": str(second.pk)}]},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (422, errors.REVISION_REQUIRED)
    assert [snapshot(r)[0] for r in (first, second)] == [State.PENDING_APPROVAL] * 2


def test_a_batch_member_without_a_revision_refuses_the_batch_on_the_page(submit, people, client):
    first, second = submit("send_email"), submit("send_email")
    client.force_login(people["alice"])
    response = client.post(
        reverse("approvals:decide-batch"),
        {"decision": "approve", "request": [f"{first.pk}:1", f"{second.pk}"]},
        **JSON_ACCEPT,
    )
    assert (response.status_code, response.json()["code"]) == (422, errors.REVISION_REQUIRED)
    assert [snapshot(r)[0] for r in (first, second)] == [State.PENDING_APPROVAL] * 2


def test_the_service_refuses_a_batch_with_a_member_without_a_revision(submit, people):
    first, second = submit("send_email"), submit("send_email")
    with pytest.raises(DomainError) as refused:
        services.decide_batch(
            [(str(first.pk), 1), (str(second.pk), None)], actor=Person(people["alice"]), verdict="approve"
        )
    assert refused.value.code == errors.REVISION_REQUIRED
    assert [snapshot(r)[0] for r in (first, second)] == [State.PENDING_APPROVAL] * 2


def test_every_card_form_that_decides_sends_its_revision(every_kind, client, people):
    client.force_login(people["alice"])
    page = client.get(reverse("approvals:queue")).content.decode()
    forms = page.split("<form")[1:]
    deciding = [form for form in forms if 'class="decide' in form.split(">", 1)[0]]
    assert len(deciding) >= len(every_kind)
    for form in deciding:
        body = form.split("</form>", 1)[0]
        assert 'name="revision"' in body or 'name="request" value="' in body, body[:300]


# --- If-Match --------------------------------------------------------------------------------------


@pytest.fixture
def alice_api(people) -> APIClient:
    api = APIClient()
    api.force_login(people["alice"])
    return api


def decide_with(api: APIClient, request, body: dict, if_match: str):
    return api.post(f"/api/v1/requests/{request.pk}/decisions/", body, format="json", HTTP_IF_MATCH=if_match)


def test_the_request_names_its_revision_as_its_etag(alice_api, submit):
    request = submit("send_email")
    assert alice_api.get(f"/api/v1/requests/{request.pk}/")["ETag"] == '"1"'


@pytest.mark.parametrize("if_match", ['"1"', "1", ' "1" '])
def test_if_match_names_the_revision_quoted_or_not(alice_api, submit, if_match):
    request = submit("send_email")
    decided = decide_with(alice_api, request, {"decision": "approve"}, if_match)
    assert decided.status_code == 200 and decided.json()["state"] == State.APPROVED, decided.json()
    assert decided["ETag"] == '"1"'


def test_a_stale_if_match_is_409_and_nothing_is_recorded(treasury_wire, people, treasurers):
    request = treasury_wire(100)
    services.approve_with_edits(request.pk, actor=Person(people["owen"]), revision=1, edits={"amount": 9_999_999})
    before = snapshot(request)
    vera = APIClient()
    vera.force_login(treasurers["vera"])
    stale = decide_with(
        vera,
        request,
        {
            "decision": "approve",
            "edits": {"memo": "checked"},
            "step_up": {"method": "password", "password": "vera-pw-123!"},
        },
        '"1"',
    )
    assert (stale.status_code, stale.json()["code"]) == (409, errors.REVISION_CHANGED)
    assert stale.json()["details"]["revision"] == 2
    assert snapshot(request) == before


@pytest.mark.parametrize("if_match", ["*", 'W/"1"', '"1", "2"', '""', "one", "1e0", "99999999999"])
def test_an_if_match_that_is_not_one_revision_is_422(alice_api, submit, if_match):
    request = submit("send_email")
    refused = decide_with(alice_api, request, {"decision": "approve"}, if_match)
    assert (refused.status_code, refused.json()["code"]) == (422, errors.REVISION_REQUIRED)
    assert snapshot(request)[0] == State.PENDING_APPROVAL


def test_if_match_and_the_body_must_agree(alice_api, submit):
    request = submit("send_email")
    refused = decide_with(alice_api, request, {"decision": "approve", "revision": 2}, '"1"')
    assert (refused.status_code, refused.json()["code"]) == (422, "validation_error")
    assert snapshot(request)[0] == State.PENDING_APPROVAL


# --- A proof binds the edits or the answer it was made for -------------------------------------------


def test_a_password_proof_for_one_edit_is_no_proof_for_another(payroll, people):
    request = payroll(100)
    for_200 = [services.edit_decision(request.pk, 1, {"amount": 200})]
    with pytest.raises(DomainError) as refused:
        services.approve_with_edits(
            request.pk,
            revision=1,
            edits={"amount": 9_999_999},
            actor=Person(people["alice"], step_up=services.StepUpProof.password("alice-pw-123!", covers=for_200)),
        )
    assert refused.value.code == errors.STEP_UP_REQUIRED
    assert snapshot(request) == (State.PENDING_APPROVAL, 1, {"amount": 100}, [])

    services.approve_with_edits(
        request.pk,
        revision=1,
        edits={"amount": 200},
        actor=Person(people["alice"], step_up=services.StepUpProof.password("alice-pw-123!", covers=for_200)),
    )
    assert snapshot(request) == (State.APPROVED, 2, {"amount": 200}, [("alice", 2, "approve")])


def test_a_proof_to_approve_as_it_stands_is_no_proof_for_an_edit_at_that_revision(payroll, people):
    request = payroll(100)
    services.approve_with_edits(request.pk, actor=Person(people["owen"]), revision=1, edits={"amount": 150})
    as_it_stands = [(str(request.pk), 2, "approve")]
    with pytest.raises(DomainError) as refused:
        services.approve_with_edits(
            request.pk,
            revision=2,
            edits={"amount": 9_999_999},
            actor=Person(people["alice"], step_up=services.StepUpProof.password("alice-pw-123!", covers=as_it_stands)),
        )
    assert refused.value.code == errors.STEP_UP_REQUIRED
    assert snapshot(request)[1:3] == (2, {"amount": 150})


def test_an_authenticator_code_bound_to_one_edit_is_no_proof_for_another(payroll, people, client, enroll_totp):
    sign_in(client, "alice")
    secret = enroll_totp(client)
    assert services.method_for(people["alice"]) == "totp"
    request = payroll(100)
    code = totp_code(secret, time.time())
    for_200 = [services.edit_decision(request.pk, 1, {"amount": 200})]
    with pytest.raises(DomainError) as refused:
        services.approve_with_edits(
            request.pk,
            revision=1,
            edits={"amount": 9_999_999},
            actor=Person(people["alice"], step_up=services.StepUpProof.totp(code, covers=for_200)),
        )
    assert refused.value.code == errors.STEP_UP_REQUIRED
    assert snapshot(request) == (State.PENDING_APPROVAL, 1, {"amount": 100}, [])


def test_the_digest_of_an_edit_is_that_of_its_json(payroll):
    """`true`, `1` and `1.0` are three different edits, though equal in Python."""
    digests = {services.payload_digest({"amount": value}) for value in (True, 1, 1.0)}
    assert len(digests) == 3
    assert services.payload_digest({"a": 1, "b": 2}) == services.payload_digest({"b": 2, "a": 1})


@pytest.fixture
def alice_passkey(people):
    """alice with a passkey, signed in on an API client on localhost (a secure context)."""
    passkey = SoftPasskey("localhost")
    passkey.enroll(people["alice"])
    api = APIClient(HTTP_HOST="localhost")
    api.force_login(people["alice"])
    return api, passkey


def passkey_proof(api: APIClient, passkey: SoftPasskey, body: dict) -> dict:
    asked = api.post(CHALLENGES, body, format="json")
    assert asked.status_code == 200, asked.json()
    options = asked.json()
    return {"method": "passkey", "nonce": options["nonce"], "assertion": passkey.sign_options(options)}


def test_a_passkey_signed_for_one_edit_does_not_approve_another(alice_passkey, payroll):
    api, passkey = alice_passkey
    request = payroll(100)
    item = [{"id": str(request.pk), "revision": 1}]
    for_200 = passkey_proof(
        api, passkey, {"decision": "approve_with_edits", "requests": item, "edits": {"amount": 200}}
    )
    swapped = api.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"amount": 9_999_999}, "step_up": for_200},
        format="json",
    )
    assert swapped.status_code == 403 and swapped.json()["code"] == errors.STEP_UP_FAILED, swapped.json()
    assert snapshot(request) == (State.PENDING_APPROVAL, 1, {"amount": 100}, [])

    for_200 = passkey_proof(
        api, passkey, {"decision": "approve_with_edits", "requests": item, "edits": {"amount": 200}}
    )
    signed = api.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "approve", "revision": 1, "edits": {"amount": 200}, "step_up": for_200},
        format="json",
    )
    assert signed.status_code == 200 and signed.json()["state"] == State.APPROVED, signed.json()


def test_a_passkey_challenge_for_an_edit_names_the_edit(alice_passkey, payroll):
    api, _ = alice_passkey
    request = payroll(100)
    bare = api.post(
        CHALLENGES,
        {"decision": "approve_with_edits", "requests": [{"id": str(request.pk), "revision": 1}]},
        format="json",
    )
    assert (bare.status_code, bare.json()["code"]) == (422, "validation_error")
    unnamed = api.post(CHALLENGES, {"decision": "approve", "requests": [{"id": str(request.pk)}]}, format="json")
    assert (unnamed.status_code, unnamed.json()["code"]) == (422, errors.REVISION_REQUIRED)


def test_a_passkey_signed_for_one_answer_does_not_give_another(alice_passkey, admin_user, token):
    api, passkey = alice_passkey
    policy.save_rule(CRITICAL_ANSWERS, actor=Person(admin_user), note="answers are critical")
    suspended = bearer(token).post("/api/v1/suspensions/", APPROVAL_STEP, format="json").json()
    request = ApprovalRequest.objects.get(pk=suspended["id"])
    assert request.risk_level == "critical"
    item = [{"id": str(request.pk), "revision": 1}]
    for_no = passkey_proof(api, passkey, {"decision": "respond", "requests": item, "resume_data": {"approved": False}})
    swapped = api.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "respond", "revision": 1, "resume_data": {"approved": True}, "step_up": for_no},
        format="json",
    )
    assert swapped.status_code == 403 and swapped.json()["code"] == errors.STEP_UP_FAILED, swapped.json()
    assert snapshot(request) == (State.PENDING_APPROVAL, 1, request.current_params(), [])

    for_yes = passkey_proof(api, passkey, {"decision": "respond", "requests": item, "resume_data": {"approved": True}})
    given = api.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "respond", "revision": 1, "resume_data": {"approved": True}, "step_up": for_yes},
        format="json",
    )
    assert given.status_code == 200 and given.json()["state"] == State.APPROVED, given.json()
    assert services.answer_of(ApprovalRequest.objects.get(pk=request.pk)) == {"approved": True}


def test_the_cards_passkey_challenge_binds_the_edit_its_form_carries(alice_passkey, payroll, people):
    """The page script asks the challenge with its form's own fields (static/js/passkey.js):
    the edit is read as the decision reads it, and the assertion approves that edit only."""
    _, passkey = alice_passkey
    request = payroll(100)
    page = Client(HTTP_HOST="localhost")
    page.force_login(people["alice"])
    challenge_url = reverse("approvals:step-up-challenge", args=[request.pk])
    edit_url = reverse("approvals:approve-with-edits", args=[request.pk])

    def signed_form(amount: str) -> dict:
        asked = page.post(challenge_url, {"decision": "edit", "revision": "1", "edit:amount": amount}, **JSON_ACCEPT)
        assert asked.status_code == 200, asked.content
        options = asked.json()
        return {"passkey_nonce": options["nonce"], "passkey_assertion": json.dumps(passkey.sign_options(options))}

    swapped = page.post(edit_url, {"revision": "1", "edit:amount": "9999999", **signed_form("200")}, **JSON_ACCEPT)
    assert swapped.status_code == 403 and swapped.json()["code"] == errors.STEP_UP_FAILED, swapped.json()
    assert snapshot(request) == (State.PENDING_APPROVAL, 1, {"amount": 100}, [])

    signed = page.post(edit_url, {"revision": "1", "edit:amount": "200", **signed_form("200")}, **JSON_ACCEPT)
    assert signed.status_code == 200 and signed.json()["state"] == State.APPROVED, signed.json()


def test_the_cards_challenge_needs_a_revision_and_is_only_for_the_reviewers_queue(alice_passkey, payroll, people):
    request = payroll(100)
    page = Client(HTTP_HOST="localhost")
    page.force_login(people["alice"])
    url = reverse("approvals:step-up-challenge", args=[request.pk])
    unnamed = page.post(url, {"decision": "approve"}, **JSON_ACCEPT)
    assert (unnamed.status_code, unnamed.json()["code"]) == (422, errors.REVISION_REQUIRED)
    stranger = Client(HTTP_HOST="localhost")
    stranger.force_login(people["mallory"])
    assert stranger.post(url, {"decision": "approve", "revision": "1"}, **JSON_ACCEPT).status_code == 404


# --- The provider re-authentication binds the edit too -------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_sign_in_at_the_provider_for_one_edit_does_not_approve_another(sso_alice, step_up_provider, payroll):
    request = payroll(100)
    item = [{"id": str(request.pk), "revision": 1}]

    def proven_for(edits: dict) -> str:
        asked = sso_alice.post(
            CHALLENGES, {"decision": "approve_with_edits", "requests": item, "edits": edits}, format="json"
        )
        assert asked.status_code == 200 and asked.json()["method"] == "provider", asked.json()
        back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, asked.json()))
        return asked.json()["nonce"]

    def edit(edits: dict, nonce: str):
        return sso_alice.post(
            f"/api/v1/requests/{request.pk}/decisions/",
            {"decision": "approve", "revision": 1, "edits": edits, "step_up": {"method": "provider", "nonce": nonce}},
            format="json",
        )

    swapped = edit({"amount": 9_999_999}, proven_for({"amount": 200}))
    assert swapped.status_code == 403, swapped.json()
    assert snapshot(request) == (State.PENDING_APPROVAL, 1, {"amount": 100}, [])
    signed = edit({"amount": 200}, proven_for({"amount": 200}))
    assert signed.status_code == 200 and signed.json()["state"] == State.APPROVED, signed.json()


# --- One digest per distinct payload ------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=10,
)


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    a=st.dictionaries(st.text(max_size=4), _json_values, min_size=1, max_size=3),
    b=st.dictionaries(st.text(max_size=4), _json_values, min_size=1, max_size=3),
)
def test_two_edits_share_a_proof_only_when_their_json_is_the_same(a, b):
    same_json = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    bound_a = services.decision_digest([services.edit_decision("r", 1, a)])
    bound_b = services.decision_digest([services.edit_decision("r", 1, b)])
    assert (bound_a == bound_b) == same_json
    assert bound_a != services.decision_digest([("r", 1, "approve")])
    assert bound_a != services.decision_digest([services.edit_decision("r", 2, a)])
