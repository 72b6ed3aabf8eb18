"""Deciding several requests at once: each at the revision the reviewer saw, each
with every guard of a single decision, under one step-up proof that covers exactly
the batch."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from approvals import errors, services
from approvals.models import ApprovalRequest, Decision
from approvals.states import State
from audit.models import AuditEvent
from tests.api.conftest import csrf_post
from tests.fixtures.revisions import current_revision


@pytest.fixture
def tess_client(treasurers):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(treasurers["tess"])
    return client


def batch(client, requests, *, password=None, decision="approve", revisions=None):
    body = {
        "decision": decision,
        "requests": [{"id": str(r.pk), "revision": (revisions or {}).get(r.pk, 1)} for r in requests],
    }
    if password is not None:
        body["step_up"] = {"method": "password", "password": password}
    return csrf_post(client, "/api/v1/decisions/", body)


def test_one_proof_approves_a_batch_of_critical_requests(wire, tess_client):
    transfers = [wire(amount) for amount in (2_000_000, 3_000_000, 4_000_000)]
    response = batch(tess_client, transfers, password="tess-pw-123!")
    assert response.status_code == 200
    body = response.json()
    assert [result["outcome"] for result in body["results"]] == ["vote_recorded"] * 3
    assert body["digest"] == services.decision_digest((str(r.pk), 1, "approve") for r in transfers)
    assert set(Decision.objects.values_list("step_up_method", flat=True)) == {"password"}
    assert AuditEvent.objects.filter(verb="auth.step_up_failed").count() == 0


def test_a_batch_proof_covers_nothing_outside_the_batch(wire, treasurers):
    inside, outside = wire(2_000_000), wire(3_000_000)
    proof = services.StepUpProof.password("tess-pw-123!", covers=[(str(inside.pk), 1, "approve")])
    tess = services.Person(treasurers["tess"], step_up=proof)
    services.approve(inside.pk, revision=current_revision(inside.pk), actor=tess)
    with pytest.raises(errors.DomainError) as refused:
        services.approve(outside.pk, revision=current_revision(outside.pk), actor=tess)
    assert refused.value.code == errors.STEP_UP_REQUIRED
    assert not Decision.objects.filter(request=outside).exists()


def test_a_request_that_moved_on_is_refused_and_the_others_are_decided(wire, treasurers, tess_client):
    moved, still = wire(2_000_000), wire(3_000_000)
    trent = services.Person(treasurers["trent"], step_up=services.StepUpProof.password("trent-pw-123!"))
    services.approve_with_edits(moved.pk, revision=current_revision(moved.pk), actor=trent, edits={"amount": 2_100_000})
    results = batch(tess_client, [moved, still], password="tess-pw-123!").json()["results"]
    assert results[0]["code"] == errors.REVISION_CHANGED
    assert results[1]["outcome"] == "vote_recorded"
    assert not Decision.objects.filter(request=moved, reviewer=treasurers["tess"]).exists()


def test_a_wrong_proof_counts_once_for_the_whole_batch(wire, tess_client):
    transfers = [wire(amount) for amount in (2_000_000, 3_000_000, 4_000_000, 5_000_000)]
    results = batch(tess_client, transfers, password="guess").json()["results"]
    assert {result["code"] for result in results} == {errors.STEP_UP_FAILED}
    assert AuditEvent.objects.filter(verb="auth.step_up_failed").count() == 1
    assert not Decision.objects.exists()


def test_a_reviewer_rejects_a_batch_without_a_step_up(wire, tess_client):
    transfers = [wire(amount) for amount in (2_000_000, 3_000_000)]
    results = batch(tess_client, transfers, decision="reject").json()["results"]
    assert [result["outcome"] for result in results] == ["rejected", "rejected"]
    assert set(ApprovalRequest.objects.values_list("state", flat=True)) == {State.REJECTED}


def test_requests_the_reviewer_cannot_see_read_as_missing(wire, people):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(people["alice"])  # a reviewer, not in treasury
    transfer = wire(2_000_000)
    results = batch(client, [transfer], password="alice-pw-123!").json()["results"]
    assert results == [{"id": str(transfer.pk), "code": errors.NOT_FOUND, "message": "No such approval request."}]
