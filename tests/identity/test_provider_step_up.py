"""Step-up by signing in again at the identity provider, for a reviewer who signs in
only there: the challenge is for exactly one decision (or batch), the provider is asked
with prompt=login and max_age=0, and the proof holds only when its ID token verifies,
carries this round trip's nonce and the reviewer's sub, and says (auth_time) that they
signed in after the challenge, just now. Then it decides that decision once, and the
audit names the method `provider`.

The provider here is tests/identity/provider.py (its key in the test's hands, to forge
with); the browser test against `oidc-provider` is tests/browser/test_sso.py.
"""

from __future__ import annotations

import time
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest
from allauth.socialaccount.models import SocialAccount
from django.urls import reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from approvals.services import method_for, provider_step_up
from approvals.states import State
from audit.models import AuditEvent
from tests.identity.provider import CLIENT_ID, new_key

pytestmark = pytest.mark.django_db(transaction=True)

CHALLENGES = "/api/v1/step-up/challenges/"
CALLBACK = "/accounts/step-up/provider/callback/"


@pytest.fixture
def step_up_provider(local_provider, settings):
    settings.SOCIALACCOUNT_PROVIDERS = {"openid_connect": {"APPS": [local_provider.app("local")]}}
    settings.MFA_REQUIRED_GROUPS = []
    local_provider.token_responses.clear()
    return local_provider


@pytest.fixture
def sso_alice(people, step_up_provider):
    """alice, who signs in only through the provider, signed in on an API client."""
    alice = people["alice"]
    alice.set_unusable_password()
    alice.save()
    SocialAccount.objects.create(user=alice, provider="local", uid="alice-sub")
    api = APIClient()
    api.force_login(alice)
    return api


@pytest.fixture
def two_payrolls(submit, critical_rule):
    return [submit("run_payroll", params={"amount": n}) for n in (1, 2)]


def challenge(api, *requests, decision: str = "approve") -> dict:
    answer = api.post(
        CHALLENGES,
        {"decision": decision, "requests": [{"id": str(r.pk), "revision": 1} for r in requests]},
        format="json",
    )
    assert answer.status_code == 200, answer.json()
    return answer.json()


def to_the_provider(api, step_up_provider, answer: dict, *, next_url: str = "/") -> dict:
    """Follow the challenge's redirect; the authorization request's parameters."""
    sent = api.get(answer["redirect"], {"next": next_url})
    assert sent.status_code == 302, sent.content
    location = urlsplit(sent["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == step_up_provider.issuer + "/authorize"
    return {name: values[0] for name, values in parse_qs(location.query).items()}


def back_from_the_provider(api, step_up_provider, asked: dict, **claims):
    """The provider's answer: an ID token (claims as given over fresh defaults) for the code."""
    now = int(time.time())
    id_token = {
        "iss": step_up_provider.issuer,
        "aud": CLIENT_ID,
        "sub": "alice-sub",
        "nonce": asked["nonce"],
        "auth_time": now,
        "iat": now,
        "exp": now + 300,
        "jti": uuid.uuid4().hex,
        **claims,
    }
    key = id_token.pop("key", None)
    step_up_provider.token_responses.append(
        {
            "access_token": "a",
            "token_type": "Bearer",
            "id_token": step_up_provider.sign({k: v for k, v in id_token.items() if v is not None}, key=key),
        }
    )
    return api.get(CALLBACK, {"code": "the-code", "state": asked["state"]})


def approve(api, request, nonce: str, **extra):
    return api.post(
        f"/api/v1/requests/{request.pk}/decisions/",
        {"decision": "approve", "revision": 1, "step_up": {"method": "provider", "nonce": nonce}, **extra},
        format="json",
    )


def state_of(request) -> str:
    return ApprovalRequest.objects.get(pk=request.pk).state


def test_someone_who_signs_in_only_through_the_provider_steps_up_there(
    sso_alice, step_up_provider, people, two_payrolls
):
    first = two_payrolls[0]
    assert method_for(people["alice"]) == "provider"
    answer = challenge(sso_alice, first)
    assert answer["method"] == "provider"

    asked = to_the_provider(sso_alice, step_up_provider, answer)
    assert (asked["prompt"], asked["max_age"], asked["client_id"]) == ("login", "0", CLIENT_ID)
    assert asked["redirect_uri"] == "http://testserver" + CALLBACK and asked["nonce"] and asked["state"]

    back = back_from_the_provider(sso_alice, step_up_provider, asked)
    assert back.status_code == 302 and back["Location"] == "/"
    decided = approve(sso_alice, first, answer["nonce"])

    assert decided.status_code == 200, decided.json()
    assert state_of(first) == State.APPROVED
    event = AuditEvent.objects.get(verb="decision.recorded", request_id=first.pk)
    assert (event.metadata["step_up"], event.metadata["step_up_credential"]) == ("provider", "local")


def test_without_the_round_trip_the_nonce_decides_nothing(sso_alice, step_up_provider, two_payrolls):
    first = two_payrolls[0]
    refused = approve(sso_alice, first, challenge(sso_alice, first)["nonce"])
    assert refused.status_code == 403 and refused.json()["code"] == "step_up_failed"
    assert state_of(first) == State.PENDING_APPROVAL


def test_a_decision_without_a_proof_names_the_provider_method(sso_alice, step_up_provider, two_payrolls):
    refused = sso_alice.post(
        f"/api/v1/requests/{two_payrolls[0].pk}/decisions/", {"decision": "approve", "revision": 1}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["details"]["method"] == "provider"


FORGED = {
    "signed in before the challenge": {"auth_time": int(time.time()) - 3600},
    "no auth_time": {"auth_time": None},
    "auth_time a string": {"auth_time": "now"},
    "another person": {"sub": "mallory-sub"},
    "another round trip's nonce": {"nonce": "a-nonce-from-elsewhere"},
    "no nonce": {"nonce": None},
    "another audience": {"aud": "someone-else"},
    "another issuer": {"iss": "https://evil.example"},
    "signed by another key": {"key": new_key()},
    "expired": {"exp": int(time.time()) - 60},
}

FORGED_REASON = {
    "signed in before the challenge": "not_fresh",
    "no auth_time": "not_fresh",
    "auth_time a string": "not_fresh",
    "another person": "another_person",
    "another round trip's nonce": "wrong_nonce",
    "no nonce": "wrong_nonce",
    "another audience": "invalid_id_token",
    "another issuer": "invalid_id_token",
    "signed by another key": "invalid_id_token",
    "expired": "invalid_id_token",
}


@pytest.mark.parametrize("forgery", FORGED, ids=list(FORGED))
def test_an_id_token_that_is_not_a_fresh_sign_in_of_this_person_proves_nothing(
    sso_alice, step_up_provider, two_payrolls, forgery
):
    first = two_payrolls[0]
    answer = challenge(sso_alice, first)
    back = back_from_the_provider(
        sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer), **FORGED[forgery]
    )

    assert back.status_code == 403
    assert approve(sso_alice, first, answer["nonce"]).status_code == 403
    assert state_of(first) == State.PENDING_APPROVAL
    reasons = [event.metadata.get("reason") for event in AuditEvent.objects.filter(verb="auth.step_up_failed")]
    assert FORGED_REASON[forgery] in reasons  # refused for its own flaw


def test_a_sign_in_older_than_the_window_proves_nothing(sso_alice, step_up_provider, two_payrolls, settings):
    """Even after the challenge: auth_time must be within PROVIDER_STEP_UP_MAX_AGE_SECONDS."""
    settings.PROVIDER_STEP_UP_MAX_AGE_SECONDS = 0
    first = two_payrolls[0]
    answer = challenge(sso_alice, first)
    asked = to_the_provider(sso_alice, step_up_provider, answer)
    # A second before now: after the challenge (within the clock skew), but older than 0 s.
    back = back_from_the_provider(sso_alice, step_up_provider, asked, auth_time=int(time.time()) - 1)
    assert back.status_code == 403


def test_the_proof_is_for_its_decision_only_and_once(sso_alice, step_up_provider, two_payrolls):
    first, second = two_payrolls
    answer = challenge(sso_alice, first)
    back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer))

    other_request = approve(sso_alice, second, answer["nonce"])
    assert other_request.status_code == 403 and state_of(second) == State.PENDING_APPROVAL
    # The refusal spent it: not even its own decision now.
    assert approve(sso_alice, first, answer["nonce"]).status_code == 403


def test_the_proof_is_for_its_verdict_only(sso_alice, step_up_provider, two_payrolls):
    first = two_payrolls[0]
    answer = challenge(sso_alice, first, decision="approve")
    back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer))
    with_edits = approve(sso_alice, first, answer["nonce"], edits={"amount": 9})
    assert with_edits.status_code == 403 and state_of(first) == State.PENDING_APPROVAL


def test_a_proven_nonce_decides_once(sso_alice, step_up_provider, two_payrolls):
    first = two_payrolls[0]
    answer = challenge(sso_alice, first)
    back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer))
    assert approve(sso_alice, first, answer["nonce"]).status_code == 200
    assert approve(sso_alice, first, answer["nonce"]).status_code in (403, 409)


def test_the_round_trip_is_used_once_and_only_from_the_session_that_started_it(
    sso_alice, step_up_provider, two_payrolls, people
):
    answer = challenge(sso_alice, two_payrolls[0])
    asked = to_the_provider(sso_alice, step_up_provider, answer)
    elsewhere = APIClient()
    elsewhere.force_login(people["alice"])
    assert back_from_the_provider(elsewhere, step_up_provider, asked).status_code == 400  # another session
    assert back_from_the_provider(sso_alice, step_up_provider, asked).status_code == 302
    assert back_from_the_provider(sso_alice, step_up_provider, asked).status_code == 400  # its state is spent


def test_the_way_back_stays_on_this_site(sso_alice, step_up_provider, two_payrolls):
    answer = challenge(sso_alice, two_payrolls[0])
    asked = to_the_provider(sso_alice, step_up_provider, answer, next_url="https://evil.example/")
    assert back_from_the_provider(sso_alice, step_up_provider, asked)["Location"] == "/"


def test_the_decision_form_takes_the_same_proof(sso_alice, step_up_provider, two_payrolls, client, people):
    first = two_payrolls[0]
    client.force_login(people["alice"])
    answer = challenge(sso_alice, first)
    back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer))
    decided = client.post(
        reverse("approvals:approve", args=[first.pk]),
        {"provider_nonce": answer["nonce"], "revision": "1"},
        HTTP_ACCEPT="application/json",
    )
    assert decided.status_code == 200, decided.content
    assert state_of(first) == State.APPROVED


def test_someone_with_a_password_is_not_sent_to_the_provider(step_up_provider, people, two_payrolls):
    api = APIClient()
    api.force_login(people["bob"])
    answer = api.post(
        CHALLENGES, {"decision": "approve", "requests": [{"id": str(two_payrolls[0].pk), "revision": 1}]}, format="json"
    )
    assert answer.status_code == 409 and answer.json()["code"] == "no_passkey"
    assert method_for(people["bob"]) == "password"


def test_the_page_can_ask_whether_the_challenge_is_proven_and_the_window_ends_on_a_page(
    sso_alice, step_up_provider, two_payrolls
):
    answer = challenge(sso_alice, two_payrolls[0])
    status = answer["redirect"] + "status/"
    assert sso_alice.get(status).json() == {"proven": False, "pending": True}
    back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer))
    assert sso_alice.get(status).json() == {"proven": True, "pending": False}
    assert APIClient().get(status).status_code == 401
    done = sso_alice.get("/accounts/step-up/provider/done/")
    assert done.status_code == 200 and b"step_up_done.js" in done.content


def test_with_passwords_turned_off_a_provider_account_steps_up_at_the_provider(step_up_provider, people, settings):
    bob = people["bob"]  # has a password, and an account at the provider
    SocialAccount.objects.create(user=bob, provider="local", uid="bob-sub")
    assert method_for(bob) == "password"
    settings.LOCAL_PASSWORD_LOGIN = False
    assert method_for(bob) == "provider"


def test_one_fresh_sign_in_approves_the_batch_it_was_made_for(sso_alice, step_up_provider, two_payrolls):
    first, second = two_payrolls
    answer = challenge(sso_alice, first, second)
    back_from_the_provider(sso_alice, step_up_provider, to_the_provider(sso_alice, step_up_provider, answer))
    body = {
        "decision": "approve",
        "requests": [{"id": str(r.pk), "revision": 1} for r in (first, second)],
        "step_up": {"method": "provider", "nonce": answer["nonce"]},
    }
    results = sso_alice.post("/api/v1/decisions/", body, format="json").json()["results"]
    assert {result.get("outcome") for result in results} == {"approved"}
    assert [state_of(first), state_of(second)] == [State.APPROVED, State.APPROVED]


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    issued=st.integers(0, 10**6),
    auth_delta=st.integers(-1000, 1000),
    now_delta=st.integers(0, 1000),
    max_age=st.integers(0, 600),
)
def test_a_sign_in_proves_the_challenge_exactly_when_it_is_after_it_and_recent(
    people, settings, issued, auth_delta, now_delta, max_age
):
    """auth_time is accepted iff it is no earlier than the challenge (less the clock skew),
    no later than now (plus the skew), and at most PROVIDER_STEP_UP_MAX_AGE_SECONDS old."""
    settings.PROVIDER_STEP_UP_MAX_AGE_SECONDS = max_age
    alice = people["alice"]
    issued_at, auth_time, now = float(issued), issued + auth_delta, float(issued + now_delta)
    nonce = provider_step_up.issue_challenge(alice, "digest", now=issued_at)
    proven = provider_step_up.record_reauthentication(alice, nonce, provider="local", auth_time=auth_time, now=now)
    skew = provider_step_up.CLOCK_SKEW_SECONDS
    assert proven == (issued_at - skew <= auth_time <= now + skew and now - auth_time <= max_age)
    assert (provider_step_up.spend(alice, nonce, "digest") == "local") == proven
    assert provider_step_up.spend(alice, nonce, "digest") == ""  # once
