"""A step-up proof (password, authenticator code, passkey, a sign-in at the identity provider)
made for one edit or answer decides nothing else: not another edit, not another answer, not
the same request approved as it stands. The story is in tests/guards/revision_story.py.
"""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals import errors, policy, services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State
from tests.api.conftest import bearer
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this module)
from tests.identity.conftest import enroll_totp, local_provider, nobody_required, sign_in, totp_code  # noqa: F401
from tests.identity.soft_passkey import SoftPasskey
from tests.identity.test_provider_step_up import back_from_the_provider, sso_alice, step_up_provider, to_the_provider  # noqa: F401
from tests.suspensions.conftest import APPROVAL_STEP

from .revision_story import CHALLENGES, CRITICAL_ANSWERS, JSON_ACCEPT, snapshot

# Step-up failure counters and spent codes live in the cache (`fresh_counters`, autouse
# here), and no group requires a second factor at sign-in (`nobody_required`).
pytestmark = pytest.mark.usefixtures("nobody_required")


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
