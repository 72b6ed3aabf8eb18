"""A decision names what it decides (DESIGN.md "Guards live in the core"): the revision it was
made on. vera's edit made on revision 1 is refused as stale (409 revision_changed) on every
path once owen's proposal made revision 2, and the request stays at owen's proposal with
nothing approved; on the revision she saw, her edit counts. The API also takes the revision
as `If-Match` (the request's ETag). The story is in tests/guards/revision_story.py.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from approvals import errors, services
from approvals.people import Person
from approvals.states import State
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this module)
from tests.identity.conftest import enroll_totp, local_provider, nobody_required, sign_in, totp_code  # noqa: F401
from tests.identity.test_provider_step_up import back_from_the_provider, sso_alice, step_up_provider, to_the_provider  # noqa: F401

from .revision_story import assert_refused, decide_with, snapshot

# Step-up failure counters and spent codes live in the cache (`fresh_counters`, autouse
# here), and no group requires a second factor at sign-in (`nobody_required`).
pytestmark = pytest.mark.usefixtures("nobody_required")


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
