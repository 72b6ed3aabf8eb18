"""The machinery of the two-agent stateful run (tests/hostile/test_stateful.py).

- `LINKS`, `with_links` and `linked_schema`: the OpenAPI links, added to a copy of
  the published schema, that schemathesis follows from one operation to the next.
- `Ledger`: who owns each request and what only its owner may see, and the
  cross-agent check every step is held to.
- `build_machine`: the hypothesis state machine with two fresh agents a scenario,
  and the rules `act_as` and `reviewer_decides`.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import schemathesis
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from schemathesis import checks as sc
from schemathesis.config import SchemathesisConfig

from agents.models import Agent
from agents.services import issue_token
from approvals import services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.states import State
from tests.fixtures.revisions import current_revision

__all__ = ["CHECKS", "ID_OPERATIONS", "LINKS", "Ledger", "build_machine", "linked_schema", "with_links"]

CHECKS = [
    sc.not_a_server_error,
    sc.status_code_conformance,
    sc.content_type_conformance,
    sc.response_schema_conformance,
    sc.response_headers_conformance,
]

ID_OPERATIONS = (
    "get_request",
    "resume_request",
    "cancel_request",
    "claim_request",
    "complete_request",
    "decide_request",
)


def _by_id(operation_id: str, expression: str = "$response.body#/id", **extra) -> dict:
    return {"operationId": operation_id, "parameters": {"path.id": expression}, **extra}


def _request_links(expression: str = "$response.body#/id") -> dict:
    """Everything an agent (or, refused, a token on the reviewers' endpoint) can do with one request id."""
    return {
        "GetRequest": _by_id("get_request", expression),
        "Resume": _by_id("resume_request", expression),
        "Cancel": _by_id("cancel_request", expression),
        "Claim": _by_id("claim_request", expression),
        "DecideWithToken": _by_id("decide_request", expression),
    }


# operationId -> {status: {link name: link}}; the OpenAPI 3.0 `links` of each response.
LINKS: dict[str, dict[str, dict]] = {
    "submit_action": {"201": _request_links()},
    "submit_plan": {
        "201": {
            **_request_links(),
            # The same path again is the plan's next revision (after a rejection it supersedes the old one).
            "Revise": {"operationId": "submit_plan", "requestBody": {"path": "$response.body#/plan/path"}},
        }
    },
    "list_requests": {"200": _request_links("$response.body#/results/0/id")},
    "get_request": {"200": _request_links()},
    "resume_request": {"200": _request_links("$response.body#/request_id")},
    "cancel_request": {"200": {"GetRequest": _by_id("get_request"), "Resume": _by_id("resume_request")}},
    "claim_request": {
        "200": {
            "Complete": _by_id("complete_request", "$request.path.id", requestBody={"token": "$response.body#/token"}),
            "GetRequest": _by_id("get_request", "$request.path.id"),
        }
    },
    "complete_request": {"200": {"GetRequest": _by_id("get_request"), "Resume": _by_id("resume_request")}},
}


def with_links(document: dict) -> dict:
    """A copy of the published schema with the links above on the responses they start from."""
    linked = copy.deepcopy(document)
    found = set()
    for operations in linked["paths"].values():
        for operation in operations.values():
            for status, links in LINKS.get(operation.get("operationId"), {}).items():
                operation["responses"][status]["links"] = links
                found.add(operation["operationId"])
    assert found == set(LINKS), set(LINKS) - found  # an operation was renamed: the links would silently vanish
    return linked


CORRELATION_FIELDS = ("run_id", "thread_id", "resource_id", "tool_call_id", "batch_id")


def linked_schema(document: dict):
    """The schemathesis schema driven by our links only.

    Link inference is off, so every transition is one written above. schemathesis
    picks scenario roots from its dependency analysis, which reads the agent's own
    correlation ids (`run_id`, `thread_id`, ...) as references to resources nobody
    creates and so would never start a scenario with a submission; those are not
    references, so they are dropped from the analysis.
    """
    config = SchemathesisConfig.from_dict({"phases": {"stateful": {"inference": {"algorithms": []}}}})
    schema = schemathesis.openapi.from_dict(with_links(document), config=config)
    for node in schema.analysis.dependency_graph.operations.values():
        node.inputs = [slot for slot in node.inputs if slot.resource_field not in CORRELATION_FIELDS]
    return schema


@dataclass
class Ledger:
    """Who owns each request and what only its owner may see, across all scenarios."""

    owner: dict[str, str] = field(default_factory=dict)  # request id -> agent name
    markers: dict[str, set[str]] = field(default_factory=dict)  # agent name -> param markers, feedback
    statuses: Counter = field(default_factory=Counter)  # (the caller's own request?, operation, status)
    cross_probes: Counter = field(default_factory=Counter)  # operation -> calls aimed at another agent's request
    failures: list[str] = field(default_factory=list)  # every failed check, in order

    @contextmanager
    def recording(self, label: str):
        """Keep each failure's message: when hypothesis replays a failing scenario against a server
        whose state has moved on, it may only report the replay as flaky."""
        try:
            yield
        except Exception as exc:
            self.failures.append(f"{label}: {exc}")
            raise

    def ids_of(self, name: str) -> set[str]:
        return {pk for pk, who in self.owner.items() if who == name}

    def check(self, machine, case, response) -> str | None:
        """Fail on any cross-agent leak in this step; return the id a submission created, if any."""
        actor, other = machine.agent_name(machine.actor), machine.agent_name(machine.other)
        operation = case.operation.definition.raw.get("operationId")
        aimed = (case.path_parameters or {}).get("id")
        aimed_owner = self.owner.get(str(aimed)) if aimed is not None else None
        self.statuses[(aimed_owner in (None, actor), operation, response.status_code)] += 1
        self.assert_nothing_of(actor, response, f"{operation} as {actor}")
        if operation == "decide_request" and _is_uuid(aimed):  # the reviewers' endpoint never takes a token
            assert response.status_code in (401, 403), (response.status_code, response.text[:300])

        if aimed_owner not in (None, actor):
            self.assert_same_as_missing(machine, machine.actor, case, response)
            return None
        if aimed_owner == actor:
            # The very same call by the other agent must look like a call on a missing request.
            shadow = machine.call_as(case, machine.other)
            self.statuses[(False, operation, shadow.status_code)] += 1
            self.assert_nothing_of(other, shadow, f"{operation} as {other} (shadowing {actor})")
            self.assert_same_as_missing(machine, machine.other, case, shadow)

        body = _json(response)
        if not isinstance(body, dict) or response.status_code >= 300:
            return None
        mine = self.ids_of(actor)
        if response.status_code == 201:  # a submission: a new request of the caller's, or a replay of one
            created = body["id"]
            assert self.owner.setdefault(created, actor) == actor, f"{actor}'s submission returned {created}"
            supersedes = body.get("supersedes")
            if supersedes:
                superseded = supersedes["id"] if isinstance(supersedes, dict) else supersedes
                assert self.owner.get(str(superseded)) == actor, f"{actor}'s plan supersedes {superseded}"
            assert body["agent"] == actor
            return created
        if operation == "list_requests":
            listed = {item["id"] for item in body["results"]}
            assert listed <= mine, f"{actor}'s list shows requests that are not its own: {listed - mine}"
            assert {item["agent"] for item in body["results"]} <= {actor}
        elif operation in ("get_request", "cancel_request", "complete_request"):
            assert body["id"] in mine and body["agent"] == actor
        elif operation in ("resume_request", "claim_request"):
            assert str(body["request_id"]) in mine
        return None

    def assert_nothing_of(self, caller: str, response, label: str) -> None:
        """No body carries another agent's ids, param markers or reviewer feedback."""
        text = response.text
        for pk, owner in self.owner.items():
            assert owner == caller or pk not in text, f"{label} returned {owner}'s request {pk}: {text[:500]}"
        for owner, secrets in self.markers.items():
            for secret in secrets if owner != caller else ():
                assert secret not in text, f"{label} returned {owner}'s {secret!r}: {text[:500]}"

    def assert_same_as_missing(self, machine, caller: str, case, response) -> None:
        """`caller` ("A"/"B") aimed `case` at another agent's request: the answer must be exactly
        the answer for a request that does not exist (same status, same body)."""
        operation = case.operation.definition.raw.get("operationId")
        self.cross_probes[operation] += 1
        missing = machine.call_as(case, caller, pk=str(uuid.uuid4()))
        assert (response.status_code, _json(response)) == (missing.status_code, _json(missing)), (
            f"{operation} as {caller} on the other agent's request answered {response.status_code} "
            f"{response.text[:300]}; on a missing request it answers {missing.status_code} {missing.text[:300]}"
        )


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _json(response):
    try:
        return json.loads(response.content or b"null")
    except ValueError:
        return response.text


def build_machine(schema, server_url: str, cast: dict, ledger: Ledger):
    reviewers = cast["reviewers"]
    numbers = iter(range(10**9))

    base = schema.as_state_machine()
    # Scenarios start with a submission or a list, not a POST on a random id: those only meet
    # 404s (tests/api/test_schema.py covers them), and here every cross-agent step already
    # sends its call once more with a random id to compare.
    hidden = {name for name in base.root_rules if "_id_" in name}
    assert hidden and len(hidden) < len(base.root_rules), base.root_rules

    class TwoAgents(base):
        def setup(self) -> None:
            """Each scenario gets two fresh agents, so what the server answers depends only on the
            scenario's own steps (hypothesis needs that), while old scenarios' requests stay
            around as other agents' requests to leak."""
            scenario = next(numbers)
            self.agents: dict[str, tuple[str, str]] = {}
            for label in ("A", "B"):
                agent = Agent.objects.create(name=f"s{scenario}-{label}", owner=cast["owners"][label])
                self.agents[label] = (agent.name, issue_token(agent).secret)
                ledger.markers[agent.name] = set()
            self.actor, self.other = "A", "B"
            self.created: list[str] = []  # this scenario's requests (a rule's precondition may only read these)

        def agent_name(self, label: str) -> str:
            return self.agents[label][0]

        @rule(actor=st.sampled_from(["A", "B"]))
        def act_as(self, actor: str) -> None:
            """From here on, steps carry this agent's token (ids from either agent stay in the bundles)."""
            self.actor, self.other = actor, "B" if actor == "A" else "A"

        @precondition(lambda self: self.created)
        @rule(pick=st.integers(min_value=0, max_value=1_000), decision=st.sampled_from(["approve", "reject"]))
        def reviewer_decides(self, pick: int, decision: str) -> None:
            """A reviewer decides one of this scenario's requests (a no-op if it is not pending)."""
            pk = self.created[pick % len(self.created)]
            if not ApprovalRequest.objects.filter(pk=pk, state=State.PENDING_APPROVAL).exists():
                return
            # Feedback reaches its own agent verbatim, so it is a marker only that agent may see.
            feedback = f"feedback.{ledger.owner[pk]}.{next(numbers)}."
            ledger.markers[ledger.owner[pk]].add(feedback)
            for reviewer in reviewers:  # a second approval when the rule wants two
                try:
                    if decision == "approve":
                        services.approve(
                            pk, revision=current_revision(pk), actor=services.Person(reviewer), feedback=feedback
                        )
                    else:
                        services.reject(
                            pk, revision=current_revision(pk), actor=services.Person(reviewer), feedback=feedback
                        )
                except DomainError:
                    break  # decided already (quorum met, rejected) or not this reviewer's to decide

        def get_call_kwargs(self, case) -> dict:
            return {"base_url": server_url, "headers": {"Authorization": f"Bearer {self.agents[self.actor][1]}"}}

        def before_call(self, case) -> None:
            query = case.query or {}
            wait = query.get("wait")
            if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0.2:
                query["wait"] = 0.2  # the long-poll itself is tested elsewhere; keep steps short
            body = case.body
            if isinstance(body, dict) and isinstance(body.get("params"), dict):
                marker = f"param.{self.agent_name(self.actor)}.{next(numbers)}."
                body["params"]["probe"] = marker
                ledger.markers[self.agent_name(self.actor)].add(marker)

        def call_as(self, case, actor: str, pk: str | None = None):
            """Send `case` again with `actor`'s token (and another path id, when given)."""
            original = case.path_parameters["id"]
            case.path_parameters["id"] = pk or original
            try:
                return case.call(base_url=server_url, headers={"Authorization": f"Bearer {self.agents[actor][1]}"})
            finally:
                case.path_parameters["id"] = original

        def after_call(self, response, case) -> None:
            super().after_call(response, case)
            with ledger.recording(f"{case.operation.label} as {self.actor}"):
                created = ledger.check(self, case, response)
            if created and created not in self.created:
                self.created.append(created)

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
            with ledger.recording(f"{case.operation.label} as {self.actor}"):
                case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs or None, recorder=self.recorder)

    for name in hidden:  # a plain attribute hides the inherited rule from hypothesis
        setattr(TwoAgents, name, None)
    TwoAgents.root_rules = base.root_rules - hidden
    return TwoAgents
