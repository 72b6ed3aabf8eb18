"""The attacks on decision integrity, each tried through every path a person decides by.

The paths: the dashboard form (a plain POST answered with a redirect and a
message), the keyboard endpoint (the same form posted by the queue page's script,
answered in JSON) and the JSON API (session + CSRF). Each attack is refused with
its stable code, or, where DESIGN.md says the edit stands as a proposal, nothing
the attacker does counts toward the approval.

The story: a `wire` transfer is medium (the reviewers decide, editable amount and
account) unless the amount is over a million, when it is critical and only the
treasury group decides, two of them. alice and bob are reviewers; tess and trent
are treasury; vera is in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from approvals import errors, policy, services
from approvals.models import ApprovalRequest, Decision
from approvals.people import Person
from approvals.permissions import can_decide
from approvals.states import State
from audit.chain import Actor, verify_chain
from audit.models import AuditEvent
from tests.api.conftest import csrf_post
from tests.fixtures.revisions import current_revision

from .conftest import WIRE, WIRE_LARGE

PATHS = ("form", "keyboard", "api")


@pytest.fixture
def everyone(people, treasurers) -> dict:
    return {**people, **treasurers}


@dataclass
class Answer:
    status: int
    code: str | None
    body: dict[str, Any]


class DecisionPath:
    """One way a signed-in person sends a decision; `send` answers what came back."""

    def __init__(self, name: str, user) -> None:
        self.name = name
        self.user = user
        self.client = APIClient(enforce_csrf_checks=name == "api")
        self.client.force_login(user)

    def send(
        self,
        request: ApprovalRequest,
        *,
        edits: dict | None = None,
        password: str | None = None,
        revision: int | None = None,
    ) -> Answer:
        """`revision`: the one the decision names; by default the one the request is at now."""
        revision = current_revision(request) if revision is None else revision
        if self.name == "api":
            body: dict[str, Any] = {"decision": "approve", "revision": revision}
            if edits:
                body["edits"] = edits
            if password is not None:
                body["step_up"] = {"method": "password", "password": password}
            response = csrf_post(self.client, f"/api/v1/requests/{request.pk}/decisions/", body)
            data = response.json()
            return Answer(response.status_code, data.get("code"), data)
        view = "approvals:approve-with-edits" if edits else "approvals:approve"
        form = {f"edit:{key}": value if isinstance(value, str) else str(value) for key, value in (edits or {}).items()}
        form["revision"] = str(revision)
        if password is not None:
            form["password"] = password
        headers = {"HTTP_ACCEPT": "application/json"} if self.name == "keyboard" else {}
        response = self.client.post(reverse(view, args=[request.pk]), form, **headers)
        if self.name == "keyboard":
            data = response.json() if response["Content-Type"] == "application/json" else {}
            return Answer(response.status_code, data.get("code"), data)
        # A plain form answers with a redirect and says what happened in a message.
        shown = [str(message) for message in response.wsgi_request._messages]
        return Answer(response.status_code, None, {"messages": shown})

    @property
    def signed_in(self) -> bool:
        return self.client.get(reverse("approvals:queue")).status_code == 200


@pytest.fixture(params=PATHS)
def decision_path(request, everyone):
    """`path("alice")`: alice deciding through this test's path."""
    return lambda name: DecisionPath(request.param, everyone[name])


def assert_refused(answer: Answer, path_name: str, code: str, status: int) -> None:
    if path_name == "form":
        assert answer.status == 302 and answer.body["messages"], answer
    else:
        assert (answer.status, answer.code) == (status, code), answer


def votes(request: ApprovalRequest) -> list[tuple[str, int]]:
    return [(d.reviewer.username, d.revision) for d in Decision.objects.filter(request=request).order_by("pk")]


# --- 1. Step-up is the service's, on every path ----------------------------------------------------


class TestStepUpOnEveryPath:
    def test_approving_a_critical_request_needs_the_step_up(self, wire, decision_path):
        request = wire(5_000_000)
        assert (request.risk_level, request.approver_group.name) == ("critical", "treasury")
        tess = decision_path("tess")

        assert_refused(tess.send(request), tess.name, errors.STEP_UP_REQUIRED, 403)
        assert votes(request) == []
        assert_refused(tess.send(request, password="guess"), tess.name, errors.STEP_UP_FAILED, 403)
        assert votes(request) == []

        answer = tess.send(request, password="tess-pw-123!")
        assert answer.status in (200, 302), answer
        assert votes(request) == [("tess", 1)]
        assert Decision.objects.get(request=request).step_up_method == "password"
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.PENDING_APPROVAL  # two are needed

    def test_approving_a_critical_request_with_edits_needs_the_step_up(self, wire, decision_path):
        request = wire(5_000_000)
        tess = decision_path("tess")
        assert_refused(tess.send(request, edits={"amount": 4_000_000}), tess.name, errors.STEP_UP_REQUIRED, 403)
        request.refresh_from_db()
        assert (request.current_revision, votes(request)) == (1, [])

    def test_an_edit_that_makes_a_request_critical_asks_for_the_step_up_of_the_new_level(self, wire, decision_path):
        request = wire(500)
        assert request.risk_level == "medium"
        vera = decision_path("vera")  # a reviewer and in treasury: her approval would count, with the step-up
        assert_refused(vera.send(request, edits={"amount": 2_500_000}), vera.name, errors.STEP_UP_REQUIRED, 403)
        request.refresh_from_db()
        assert (request.current_revision, request.risk_level, votes(request)) == (1, "medium", [])

        vera.send(request, edits={"amount": 2_500_000}, password="vera-pw-123!")
        request.refresh_from_db()
        assert (request.current_revision, request.risk_level, request.approver_group.name) == (
            2,
            "critical",
            "treasury",
        )
        assert votes(request) == [("vera", 2)]

    def test_the_service_itself_refuses_without_the_proof(self, wire, treasurers):
        request = wire(5_000_000)
        with pytest.raises(errors.DomainError) as refused:
            services.approve(
                request.pk, revision=current_revision(request.pk), actor=services.Person(treasurers["tess"])
            )
        assert refused.value.code == errors.STEP_UP_REQUIRED

    def test_a_proof_is_valid_for_the_one_decision_it_came_with(self, wire, treasurers):
        first, second = wire(5_000_000), wire(6_000_000)
        proof = services.StepUpProof.password("tess-pw-123!")
        tess = services.Person(treasurers["tess"], step_up=proof)
        services.approve(first.pk, revision=current_revision(first.pk), actor=tess)
        with pytest.raises(errors.DomainError) as reused:
            services.approve(second.pk, revision=current_revision(second.pk), actor=tess)
        assert reused.value.code == errors.STEP_UP_REQUIRED
        assert votes(second) == []


# --- 2. An edit never takes a request past its deciding group ---------------------------------------


class TestEditsCannotEscalatePastTheGroup:
    def test_an_edit_by_someone_outside_the_new_group_is_only_a_proposal(self, wire, decision_path, everyone):
        request = wire(500)
        alice = decision_path("alice")
        answer = alice.send(request, edits={"amount": 9_999_999, "to": "attacker-acct"})
        assert answer.status in (200, 302), answer
        if alice.name == "api":
            assert answer.body["outcome"] == "edit_proposed"
        if alice.name == "keyboard":
            assert answer.body["proposal"] is True

        request.refresh_from_db()
        assert request.state == State.PENDING_APPROVAL
        assert (request.risk_level, request.required_approvals, request.approver_group.name) == (
            "critical",
            2,
            "treasury",
        )
        assert votes(request) == []  # her edit is not an approval
        assert not can_decide(everyone["alice"], request) and not can_decide(everyone["bob"], request)
        assert can_decide(everyone["tess"], request)
        verbs = list(AuditEvent.objects.filter(request_id=request.pk).values_list("verb", flat=True))
        assert verbs[-3:] == ["request.reclassified", "request.revised", "request.edit_proposed"]

        # Her colleague in the old group can no longer approve it either.
        bob = decision_path("bob")
        refused = bob.send(request)
        if bob.name == "api":
            assert (refused.status, refused.code) == (403, errors.NOT_PERMITTED)
        else:
            assert refused.status == 404
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.PENDING_APPROVAL

    def test_two_reviewers_outside_treasury_cannot_approve_a_transfer_they_inflated(
        self, submit, admin_user, treasurers, people, agent
    ):
        policy.save_rules([WIRE_LARGE, {**WIRE, "required_approvals": 2}], actor=Person(admin_user), note="two eyes")
        request = submit("wire", params={"amount": 500, "to": "acct-supplier"}, target={"ledger": "main"})
        alice, bob = services.Person(people["alice"]), services.Person(people["bob"])
        services.approve_with_edits(
            request.pk,
            revision=current_revision(request.pk),
            actor=alice,
            edits={"amount": 2_500_000, "to": "attacker-acct"},
        )
        with pytest.raises(errors.DomainError) as refused:
            services.approve(request.pk, revision=current_revision(request.pk), actor=bob)
        assert refused.value.code == errors.NOT_PERMITTED
        with pytest.raises(errors.DomainError) as unclaimable:
            services.claim_execution(request.pk, actor=Actor.for_agent(agent), agent=agent)
        assert unclaimable.value.code == errors.ILLEGAL_TRANSITION

        # The group that owns the decision can still make it, with its quorum and step-up.
        for name in ("tess", "trent"):
            proof = services.StepUpProof.password(f"{name}-pw-123!")
            services.approve(
                request.pk,
                revision=current_revision(request.pk),
                actor=services.Person(treasurers[name], step_up=proof),
            )
        grant = services.claim_execution(request.pk, actor=Actor.for_agent(agent), agent=agent)
        assert grant.params["to"] == "attacker-acct"  # what treasury approved, knowingly
        assert votes(request) == [("tess", 2), ("trent", 2)]

    def test_an_edit_that_lowers_the_risk_keeps_the_stricter_classification(self, wire, treasurers):
        request = wire(5_000_000)
        tess = services.Person(treasurers["tess"], step_up=services.StepUpProof.password("tess-pw-123!"))
        services.approve_with_edits(request.pk, revision=current_revision(request.pk), actor=tess, edits={"amount": 10})
        request.refresh_from_db()
        assert (request.risk_level, request.required_approvals, request.approver_group.name) == (
            "critical",
            2,
            "treasury",
        )
        assert request.state == State.PENDING_APPROVAL
        assert votes(request) == [("tess", 2)]

    def test_the_target_is_never_editable(self, wire, people):
        request = wire(500)
        with pytest.raises(errors.DomainError) as refused:
            services.approve_with_edits(
                request.pk,
                revision=current_revision(request.pk),
                actor=services.Person(people["alice"]),
                edits={"ledger": "other"},
            )
        assert refused.value.code == errors.PARAM_NOT_EDITABLE


# --- 4. The step-up prompt is no password oracle ----------------------------------------------------


class TestStepUpIsNoOracle:
    def test_repeated_wrong_step_ups_end_the_session(self, wire, decision_path):
        request = wire(5_000_000)
        tess = decision_path("tess")
        for _ in range(2):
            assert_refused(tess.send(request, password="guess"), tess.name, errors.STEP_UP_FAILED, 403)
        assert tess.signed_in
        assert_refused(tess.send(request, password="guess"), tess.name, errors.SESSION_ENDED, 401)
        assert not tess.signed_in
        assert votes(request) == []
        events = AuditEvent.objects.filter(verb__startswith="auth.").order_by("seq")
        assert [(e.verb, e.actor_label) for e in events] == [
            ("auth.step_up_failed", "tess"),
            ("auth.step_up_failed", "tess"),
            ("auth.step_up_failed", "tess"),
            ("auth.session_ended", "tess"),
        ]
        assert "guess" not in str(list(events.values_list("metadata", flat=True)))
        assert verify_chain().ok

    def test_a_right_step_up_resets_the_count(self, wire, treasurers):
        first, second = wire(5_000_000), wire(6_000_000)
        tess = treasurers["tess"]
        for request in (first, second):
            for _ in range(2):
                with pytest.raises(errors.DomainError):
                    services.approve(
                        request.pk,
                        revision=current_revision(request.pk),
                        actor=services.Person(tess, step_up=services.StepUpProof.password("no")),
                    )
            services.approve(
                request.pk,
                revision=current_revision(request.pk),
                actor=services.Person(tess, step_up=services.StepUpProof.password("tess-pw-123!")),
            )
        assert not AuditEvent.objects.filter(verb="auth.session_ended").exists()


# --- 3. What only the agent vouches for never lowers the risk (through the agents' API) --------------

AGENT_FIELD_RULES = [
    {
        "name": "undoable_deletes_low",
        "priority": 1,
        "action_type": "delete_files",
        "risk_level": "low",
        "conditions": [{"path": "impact.reversible", "op": "eq", "value": True}],
    },
    {
        "name": "bulk_deletes",
        "priority": 2,
        "action_type": "delete_files",
        "risk_level": "high",
        "required_approvals": 2,
        "conditions": [{"path": "impact.target_count", "op": "gt", "value": 10}],
    },
    {"name": "deletes", "priority": 3, "action_type": "delete_files", "risk_level": "medium"},
    {
        "name": "big_wires",
        "priority": 4,
        "action_type": "wire_funds",
        "risk_level": "critical",
        "required_approvals": 2,
        "conditions": [{"path": "impact.amount", "op": "gt", "value": 1_000_000}],
    },
    {"name": "wires", "priority": 5, "action_type": "wire_funds", "risk_level": "high"},
]
HUNDRED_FILES = {"ids": list(range(100))}

AGENT_FIELD_ATTACKS = {
    "target.reversible true on a bulk delete": (
        {"action_type": "delete_files", "params": HUNDRED_FILES, "target": {"reversible": True}},
        "high",
    ),
    "target.ids hiding params.ids": (
        {"action_type": "delete_files", "params": HUNDRED_FILES, "target": {"ids": [1]}},
        "high",
    ),
    "amount with an exponent": ({"action_type": "wire_funds", "params": {"amount": "5e6"}}, "critical"),
    "amount with separators": ({"action_type": "wire_funds", "params": {"amount": "2,500,000"}}, "critical"),
    "amount with a leading space": ({"action_type": "wire_funds", "params": {"amount": " 2500000"}}, "critical"),
    "amount as value and currency": (
        {"action_type": "wire_funds", "params": {"amount": {"value": 2_500_000, "currency": "USD"}}},
        "critical",
    ),
    "amount under a capitalised key": ({"action_type": "wire_funds", "params": {"Amount": 2_500_000}}, "critical"),
    "a capitalised prohibited name": ({"action_type": "Delete_Database"}, "prohibited"),
    "a prohibited name with a trailing slash": ({"action_type": "delete_database/"}, "prohibited"),
    "a destructive verb inside a read_* name": ({"action_type": "read_and_delete_database"}, "medium"),
    "a destructive verb in camelCase": ({"action_type": "readAndDeleteDatabase"}, "medium"),
}


@pytest.fixture
def agent_field_policy(admin_user):
    policy.save_rules(AGENT_FIELD_RULES, actor=Person(admin_user), note="deletes and wires")


@pytest.fixture
def agent_api(agent):
    from agents.services import issue_token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(agent).secret}")
    return client


class TestAgentFieldsNeverLowerTheRisk:
    @pytest.mark.parametrize("attack", AGENT_FIELD_ATTACKS, ids=list(AGENT_FIELD_ATTACKS))
    def test_the_submission_gets_the_strict_answer(self, agent_api, agent_field_policy, attack):
        body, level = AGENT_FIELD_ATTACKS[attack]
        response = agent_api.post("/api/v1/actions/", body, format="json")
        assert response.status_code == 201, response.json()
        created = response.json()
        assert created["risk_level"] == level, created["rule"]
        assert created["state"] != State.APPROVED  # nothing here may run unreviewed

    def test_a_look_alike_letter_is_refused_before_any_rule_reads_it(self, agent_api, agent_field_policy):
        response = agent_api.post("/api/v1/actions/", {"action_type": "d\u0435lete_database"}, format="json")
        assert response.status_code == 422
        assert response.json()["details"]["fields"]["action_type"]
        assert not ApprovalRequest.objects.exists()
