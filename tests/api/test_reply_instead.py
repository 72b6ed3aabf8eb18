"""A reviewer may reply in place of the tool (LangChain HITL's `respond`) where the
agent's host allows it; submissions state what their host allows and may come in
batches (one agent step, several calls).

The reply ends the request as rejected (the tool never runs, nothing can claim it),
the agent resumes with `{action: "responded", message}`, and the audit log records
`request.responded`. Every path to it meets the same guards in the service core.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.resume import ACTION_RESPONDED, resume_payload
from approvals import errors, services
from approvals.models import ApprovalRequest, Decision
from approvals.states import State
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, PLAN_MD, csrf_post
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db

ASK = {"action_type": "ask_user", "params": {"question": "Which mailbox?"}, "allowed_decisions": ["respond", "reject"]}
JSON = {"HTTP_ACCEPT": "application/json"}


def _submit(api, body: dict) -> dict:
    response = api.post("/api/v1/actions/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _decide(reviewer_client, name: str, request_id: str, body: dict):
    return csrf_post(reviewer_client(name), f"/api/v1/requests/{request_id}/decisions/", body)


# --- The submission states what its host can apply ---------------------------------------


def test_a_submission_states_its_allowed_decisions_and_defaults_to_what_every_host_applies(api):
    assert _submit(api, EMAIL)["allowed_decisions"] == ["approve", "edit", "reject"]
    stated = _submit(api, {**EMAIL, "allowed_decisions": ["approve", "respond", "approve"]})
    assert stated["allowed_decisions"] == ["approve", "respond"]
    assert ApprovalRequest.objects.get(pk=stated["id"]).allowed_decisions == ["approve", "respond"]


@pytest.mark.parametrize("allowed", [[], ["maybe"], "approve", ["approve", None]])
def test_allowed_decisions_outside_the_four_are_refused(api, allowed):
    response = api.post("/api/v1/actions/", {**EMAIL, "allowed_decisions": allowed}, format="json")
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"
    assert "allowed_decisions" in response.json()["details"]["fields"]


def test_the_schema_documents_allowed_decisions_batch_and_the_reply(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    parts = schema["components"]["schemas"]

    def enum(prop: dict) -> list:
        ref = prop.get("$ref") or prop.get("items", {}).get("$ref") or prop["allOf"][0]["$ref"]
        return parts[ref.rsplit("/", 1)[-1]]["enum"]

    submission = parts["ActionSubmissionRequest"]["properties"]
    assert enum(submission["allowed_decisions"]) == ["approve", "edit", "reject", "respond"]
    assert "batch_id" in submission
    assert {"batch_id", "allowed_decisions"} <= set(parts["DecisionResult"]["properties"])
    assert "message" in parts["DecisionRequest"]["properties"]
    assert "respond" in enum(parts["DecisionRequest"]["properties"]["decision"])
    actions_and_plans = parts["Resume"]["properties"]["resume_data"]["anyOf"][0]
    assert "responded" in actions_and_plans["properties"]["action"]["enum"]
    decide = schema["paths"]["/api/v1/requests/{id}/decisions/"]["post"]["responses"]["422"]
    assert "decision_not_allowed" in str(decide) and "reply_required" in str(decide)
    listed = [p["name"] for p in schema["paths"]["/api/v1/requests/"]["get"]["parameters"]]
    assert "batch" in listed


# --- Replying through the API ------------------------------------------------------------------


def test_a_reply_ends_the_action_unrun_and_the_agent_resumes_with_it(api, reviewer_client):
    request_id = _submit(api, ASK)["id"]
    reply = "Use the shared outbox, not <script>alert(1)</script>."
    response = _decide(reviewer_client, "bob", request_id, {"decision": "respond", "revision": 1, "message": reply})
    assert response.status_code == 200, response.content
    assert (response.json()["state"], response.json()["outcome"]) == ("rejected", "rejected")
    resumed = api.get(f"/api/v1/requests/{request_id}/resume/").json()
    assert resumed["resume_data"] == {"action": "responded", "message": reply}
    assert resumed["tool_result"] == ACTION_RESPONDED.format(message=reply)
    claim = api.post(f"/api/v1/requests/{request_id}/claim/", {"nonce": "n" * 43}, format="json")
    assert claim.status_code == 409  # nothing can run it


def test_a_reply_is_audited_as_its_own_verb_with_a_digest_not_the_words(api, reviewer_client):
    request_id = _submit(api, ASK)["id"]
    _decide(reviewer_client, "bob", request_id, {"decision": "respond", "revision": 1, "message": "The shared outbox."})
    verbs = list(AuditEvent.objects.filter(request_id=request_id).values_list("verb", flat=True))
    assert verbs[-2:] == ["decision.recorded", "request.responded"]
    assert "request.rejected" not in verbs
    responded = AuditEvent.objects.get(request_id=request_id, verb="request.responded")
    assert (responded.actor_label, responded.metadata["from"], responded.metadata["to"]) == (
        "bob",
        "pending_approval",
        "rejected",
    )
    assert "The shared outbox." not in str(responded.metadata)
    vote = Decision.objects.get(request_id=request_id)
    assert (vote.verdict, vote.feedback) == ("respond", "The shared outbox.")


def test_a_reply_where_the_host_does_not_allow_it_is_refused_and_changes_nothing(api, reviewer_client):
    request_id = _submit(api, EMAIL)["id"]
    refused = _decide(reviewer_client, "bob", request_id, {"decision": "respond", "revision": 1, "message": "No."})
    assert refused.status_code == 422
    assert refused.json()["code"] == "decision_not_allowed"
    assert ApprovalRequest.objects.get(pk=request_id).state == State.PENDING_APPROVAL
    assert not Decision.objects.filter(request_id=request_id).exists()


def test_a_plan_cannot_be_answered_in_place_of_a_tool(api, reviewer_client):
    plan_id = api.post("/api/v1/plans/", {"path": "plans/auth.md", "plan": PLAN_MD}, format="json").json()["id"]
    refused = _decide(
        reviewer_client, "bob", plan_id, {"decision": "respond", "revision": 1, "message": "Do it differently."}
    )
    assert refused.status_code == 422 and refused.json()["code"] == "decision_not_allowed"
    assert ApprovalRequest.objects.get(pk=plan_id).state == State.PENDING_APPROVAL


@pytest.mark.parametrize("message", ["", "   \n\t"])
def test_a_reply_needs_words(api, reviewer_client, message):
    request_id = _submit(api, ASK)["id"]
    refused = _decide(reviewer_client, "bob", request_id, {"decision": "respond", "revision": 1, "message": message})
    assert refused.status_code == 422 and refused.json()["code"] == "reply_required"
    assert ApprovalRequest.objects.get(pk=request_id).state == State.PENDING_APPROVAL


def test_approve_and_edit_the_host_cannot_apply_are_refused_but_rejecting_never_is(
    api, reviewer_client, two_person_rule
):
    ask = _submit(api, ASK)["id"]
    approve = _decide(reviewer_client, "alice", ask, {"decision": "approve", "revision": 1})
    assert approve.status_code == 422 and approve.json()["code"] == "decision_not_allowed"
    transfer = _submit(
        api, {"action_type": "transfer_funds", "params": {"amount": 900}, "allowed_decisions": ["approve", "reject"]}
    )["id"]
    edit = _decide(reviewer_client, "alice", transfer, {"decision": "approve", "revision": 1, "edits": {"amount": 500}})
    assert edit.status_code == 422 and edit.json()["code"] == "decision_not_allowed"
    assert ApprovalRequest.objects.get(pk=transfer).current_revision == 1
    only_approve = _submit(api, {**EMAIL, "allowed_decisions": ["approve"]})["id"]
    reject = _decide(reviewer_client, "bob", only_approve, {"decision": "reject", "revision": 1, "feedback": "Stop."})
    assert reject.status_code == 200 and reject.json()["state"] == "rejected"


def test_a_reply_is_decided_like_a_rejection(api, reviewer_client, two_person_rule):
    # Two approvals needed, yet one reply is final: it cannot make anything run.
    request_id = _submit(
        api, {"action_type": "transfer_funds", "params": {"amount": 900}, "allowed_decisions": ["approve", "respond"]}
    )["id"]
    # The agent's owner may reply, as they may reject; a person who cannot see it reads 404.
    hidden = _decide(reviewer_client, "mallory", request_id, {"decision": "respond", "revision": 1, "message": "x"})
    assert hidden.status_code == 404
    stale = _decide(reviewer_client, "owen", request_id, {"decision": "respond", "message": "x", "revision": 2})
    assert stale.status_code == 409 and stale.json()["code"] == "revision_changed"
    owner = _decide(
        reviewer_client, "owen", request_id, {"decision": "respond", "message": "Ask finance.", "revision": 1}
    )
    assert owner.status_code == 200 and owner.json()["state"] == "rejected"
    late = _decide(reviewer_client, "alice", request_id, {"decision": "respond", "revision": 1, "message": "Mine."})
    assert late.status_code == 409 and late.json()["code"] == "already_decided"


def test_the_service_refuses_a_reply_to_a_request_no_longer_pending(submit, people):
    request = submit("ask_user", params={"q": "?"}, allowed_decisions=["approve", "respond"])
    services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"]))
    with pytest.raises(errors.DomainError) as refused:
        services.respond_instead(
            request.pk, "Too late", revision=current_revision(request.pk), actor=services.Person(people["bob"])
        )
    assert refused.value.code == "already_decided"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=st.text(min_size=1, max_size=300).filter(lambda text: text.strip() and "\x00" not in text))
def test_any_reply_reaches_the_agent_verbatim(submit, people, message):
    request = submit("ask_user", params={"q": "?"}, allowed_decisions=["respond"])
    services.respond_instead(
        request.pk, message, revision=current_revision(request.pk), actor=services.Person(people["bob"])
    )
    resumed = resume_payload(ApprovalRequest.objects.get(pk=request.pk))
    assert resumed["resume_data"] == {"action": "responded", "message": message}
    assert resumed["tool_result"].endswith(message)


# --- Replying from the page ----------------------------------------------------------------------


def test_the_card_offers_a_reply_only_where_the_host_allows_it(client, people, submit):
    ask = submit("ask_user", params={"q": "Which mailbox?"}, allowed_decisions=["respond", "reject"])
    email = submit("send_email")
    client.force_login(people["alice"])
    page = client.get(reverse("approvals:queue")).content.decode()
    assert page.count("Reply instead") == 1
    assert reverse("approvals:respond", args=[ask.pk]) in page
    assert reverse("approvals:respond", args=[email.pk]) not in page


def test_replying_from_the_page_meets_the_same_guards(client, people, submit):
    ask = submit("ask_user", params={"q": "?"}, allowed_decisions=["respond"])
    email = submit("send_email")
    client.force_login(people["bob"])
    refused = client.post(reverse("approvals:respond", args=[email.pk]), {"message": "No.", "revision": "1"}, **JSON)
    assert refused.status_code == 422 and refused.json()["code"] == "decision_not_allowed"
    blank = client.post(reverse("approvals:respond", args=[ask.pk]), {"message": " ", "revision": "1"}, **JSON)
    assert blank.status_code == 422 and blank.json()["code"] == "reply_required"
    huge = client.post(reverse("approvals:respond", args=[ask.pk]), {"message": "x" * 10_001, "revision": "1"}, **JSON)
    assert huge.status_code == 422 and huge.json()["code"] == "validation_error"
    done = client.post(reverse("approvals:respond", args=[ask.pk]), {"message": "Outbox B.", "revision": "1"}, **JSON)
    assert done.status_code == 200 and done.json()["state"] == "rejected"
    assert ApprovalRequest.objects.get(pk=ask.pk).resolution_code == "responded"


def test_a_hostile_reply_is_shown_escaped_in_the_history(client, people, submit):
    ask = submit("ask_user", params={"q": "?"}, allowed_decisions=["respond"])
    services.respond_instead(
        ask.pk, "<script>alert(1)</script>", revision=current_revision(ask.pk), actor=services.Person(people["bob"])
    )
    client.force_login(people["alice"])
    page = client.get(reverse("approvals:history")).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page


def test_the_reply_form_needs_the_csrf_token(people, submit):
    browser_client = Client(enforce_csrf_checks=True)
    ask = submit("ask_user", params={"q": "?"}, allowed_decisions=["respond"])
    browser_client.force_login(people["bob"])
    response = browser_client.post(reverse("approvals:respond", args=[ask.pk]), {"message": "x"})
    assert response.status_code == 403
    assert ApprovalRequest.objects.get(pk=ask.pk).state == State.PENDING_APPROVAL


# --- Batches ------------------------------------------------------------------------------------------


def test_a_batch_is_stored_filterable_and_decided_one_by_one_or_all_at_once(
    api, reviewer_client, django_assert_max_num_queries
):
    batch = [
        _submit(api, {**EMAIL, "batch_id": "interrupt-7", "run_id": "run-1", "tool_call_id": f"call-{i}"})
        for i in range(3)
    ]
    _submit(api, {**EMAIL, "batch_id": "interrupt-8"})
    alice = reviewer_client("alice")
    with django_assert_max_num_queries(8):
        listed = alice.get("/api/v1/requests/", {"batch": "interrupt-7"}).json()["results"]
    assert sorted(r["tool_call_id"] for r in listed) == ["call-0", "call-1", "call-2"]
    assert {r["batch_id"] for r in listed} == {"interrupt-7"}
    one = _decide(
        reviewer_client, "bob", batch[0]["id"], {"decision": "reject", "revision": 1, "feedback": "Not this one."}
    )
    assert one.status_code == 200
    rest = csrf_post(
        alice,
        "/api/v1/decisions/",
        {"decision": "approve", "requests": [{"id": r["id"], "revision": 1} for r in batch[1:]]},
    )
    assert [r["outcome"] for r in rest.json()["results"]] == ["approved", "approved"]
    assert [api.get(f"/api/v1/requests/{r['id']}/").json()["state"] for r in batch] == [
        "rejected",
        "approved",
        "approved",
    ]
    # Each keeps its own decision and audit.
    for request in batch:
        assert AuditEvent.objects.filter(request_id=request["id"], verb="decision.recorded").count() == 1


def test_a_batch_approval_refuses_only_the_call_whose_host_cannot_take_it(api, reviewer_client):
    ask = _submit(api, {**ASK, "batch_id": "b-1"})
    email = _submit(api, {**EMAIL, "batch_id": "b-1"})
    answer = csrf_post(
        reviewer_client("alice"),
        "/api/v1/decisions/",
        {"decision": "approve", "requests": [{"id": ask["id"], "revision": 1}, {"id": email["id"], "revision": 1}]},
    )
    by_id = {r["id"]: r for r in answer.json()["results"]}
    assert by_id[ask["id"]]["code"] == "decision_not_allowed"
    assert by_id[email["id"]]["outcome"] == "approved"


def test_the_card_carries_its_batch(people, submit):
    from approvals.web.cards import build_cards

    request = submit("send_email", batch_id="interrupt-9")
    (card,) = build_cards([ApprovalRequest.objects.select_related("agent").get(pk=request.pk)], viewer=people["alice"])
    assert card.batch_id == "interrupt-9" and not card.allows_reply
    assert card.batch_group == f"{request.agent_id}:interrupt-9"


def test_another_agent_reusing_a_batch_id_is_not_in_the_group(people, submit, rival):
    from approvals.web.cards import build_cards

    mine = submit("send_email", batch_id="interrupt-1")
    theirs = submit("send_email", batch_id="interrupt-1", agent=rival)
    cards = build_cards(
        ApprovalRequest.objects.select_related("agent").filter(pk__in=[mine.pk, theirs.pk]), viewer=people["alice"]
    )
    assert len({card.batch_group for card in cards}) == 2


def test_a_move_is_recorded_only_under_its_own_verb_or_a_registered_variant(submit, people):
    from approvals.services.core import changing, transition

    request = submit("ask_user", params={"q": "?"}, allowed_decisions=["respond"])
    with pytest.raises(ValueError), changing(request.pk) as locked:
        transition(locked, State.REJECTED, actor=services.Person(people["bob"]), verb="request.approved")
    assert ApprovalRequest.objects.get(pk=request.pk).state == State.PENDING_APPROVAL
    assert not AuditEvent.objects.filter(request_id=request.pk, verb="request.approved").exists()
