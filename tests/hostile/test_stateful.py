"""A schemathesis stateful run over the whole agent API, as two agents at once.

schemathesis 4 builds a hypothesis state machine from the OpenAPI links: submit
an action or plan, then follow the created request's id into get / resume /
cancel / claim (and claim's grant token into complete), a plan into its next
revision, a list into one of its items, and into the reviewers' decision
endpoint, which a token must never pass. Two rules are ours: `act_as` switches
which agent's token the following steps carry, and `reviewer_decides` has a
reviewer approve or reject (with feedback) a pending request, so claims and
completes and rejected-plan revisions are reached too.

Each scenario has two fresh agents, A and B (earlier scenarios' agents and their
requests stay on the server as more strangers). Each step runs the standard checks
(no 5xx, status code documented, content type, response schema and headers) and
the cross-agent check (`Ledger.check`):
- a step aimed at another agent's request answers exactly what the same call aimed
  at a request that does not exist answers (same status, same body), and every step
  on the caller's own request is sent once more with the other agent's token and
  held to the same rule;
- every id a response returns belongs to the caller (a list, a detail, a resume,
  a grant, a submission's `supersedes`), and no body carries another agent's
  ids, param markers or reviewer feedback.

The links are added here, to a copy of the published schema, so production's
schema is unchanged. The run is bounded by example and step counts (no timing
thresholds) against a private daphne whose rate limit and long-poll cap suit it.
"""

from __future__ import annotations

import copy
import json
import urllib.request
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from schemathesis import checks as sc
from schemathesis.config import SchemathesisConfig

from agents.models import Agent
from agents.services import issue_token
from approvals import policy, services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.states import State
from tests.api.conftest import bearer
from approvals.people import Person

CHECKS = [sc.not_a_server_error, sc.status_code_conformance, sc.content_type_conformance,
          sc.response_schema_conformance, sc.response_headers_conformance]

# Bounded by count: 60 scenarios of up to 20 steps (31-46 s on this shared 2-core machine).
MAX_EXAMPLES = 60
STEPS = 20

ID_OPERATIONS = ("get_request", "resume_request", "cancel_request", "claim_request", "complete_request",
                 "decide_request")


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
    "submit_plan": {"201": {
        **_request_links(),
        # The same path again is the plan's next revision (after a rejection it supersedes the old one).
        "Revise": {"operationId": "submit_plan", "requestBody": {"path": "$response.body#/plan/path"}},
    }},
    "list_requests": {"200": _request_links("$response.body#/results/0/id")},
    "get_request": {"200": _request_links()},
    "resume_request": {"200": _request_links("$response.body#/request_id")},
    "cancel_request": {"200": {"GetRequest": _by_id("get_request"), "Resume": _by_id("resume_request")}},
    "claim_request": {"200": {
        "Complete": _by_id("complete_request", "$request.path.id",
                           requestBody={"token": "$response.body#/token"}),
        "GetRequest": _by_id("get_request", "$request.path.id"),
    }},
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


CORRELATION_FIELDS = ("run_id", "thread_id", "resource_id", "tool_call_id")


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


@pytest.fixture
def stateful_server(transactional_db, django_db_blocker):
    """A private daphne: no rate limiting in the way, long-polls capped at 1 s."""
    from tests.live import DaphneServer, child_environment

    server = DaphneServer(env=child_environment(AGENT_TOKEN_RATE_LIMIT="1000000", API_MAX_WAIT_SECONDS="1"))
    yield server
    server.stop()


# Generated action types are arbitrary strings; the seeded policy would queue them all for a
# person. As low risk they are auto-approved, so claim -> complete is reached through the links;
# plans (and the seeded types) still queue, for `reviewer_decides`.
ANY_ACTION_IS_LOW = {"name": "stateful_any_action_low", "priority": 10_000, "action_type": "*", "risk_level": "low"}


@pytest.fixture
def cast(people, admin_user):
    """Owners of the scenarios' agents (owen for A, rita for B), reviewers alice and bob, and a
    policy under which generated actions auto-approve."""
    policy.save_rule(ANY_ACTION_IS_LOW, actor=Person(admin_user), note="stateful run: generated actions auto-approve")
    return {"owners": {"A": people["owen"], "B": people["rita"]}, "reviewers": [people["alice"], people["bob"]]}


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
                        services.approve(pk, actor=services.Person(reviewer), feedback=feedback)
                    else:
                        services.reject(pk, actor=services.Person(reviewer), feedback=feedback)
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
                case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs or None,
                                       recorder=self.recorder)

    for name in hidden:  # a plain attribute hides the inherited rule from hypothesis
        setattr(TwoAgents, name, None)
    TwoAgents.root_rules = base.root_rules - hidden
    return TwoAgents


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_agents_stateful_run(stateful_server, cast):
    with urllib.request.urlopen(f"{stateful_server.url}/api/schema/?format=json") as published:
        document = json.load(published)
    ledger = Ledger()
    machine = build_machine(linked_schema(document), stateful_server.url, cast, ledger)

    try:
        machine.run(settings=settings(
            max_examples=MAX_EXAMPLES, stateful_step_count=STEPS, deadline=None, derandomize=True, database=None,
            phases=[Phase.generate], suppress_health_check=list(HealthCheck),
        ))
    except Exception as exc:
        if ledger.failures:  # the first failure, whatever hypothesis made of the replay
            raise AssertionError(f"first failure of {len(ledger.failures)}: {ledger.failures[0]}") from exc
        if not isinstance(exc, Flaky):
            raise
        # No check failed, but the server answered one replayed step differently (its state
        # moves on); schemathesis's own runner treats that as no failure too. The run stops
        # there, and the coverage asserts below say whether it got far enough.
        print(f"hypothesis stopped the run as flaky after {sum(ledger.statuses.values())} calls: {exc}")

    summary = "\n".join(f"{'own' if own else 'other'} {op} {status}: {n}"
                        for (own, op, status), n in sorted(ledger.statuses.items(), key=str))
    print(f"\n{summary}\ncross-agent probes: {dict(ledger.cross_probes)}")
    # The run reached what it is for (otherwise a passing run would prove little):
    creators = {name.rsplit("-", 1)[1] for name in ledger.owner.values()}
    assert creators == {"A", "B"}, summary  # both agents of a scenario submit
    assert set(ID_OPERATIONS) <= set(ledger.cross_probes), ledger.cross_probes  # each tried on another's request
    assert ledger.statuses[(True, "claim_request", 200)] >= 1, summary  # a grant, through a link
    assert ledger.statuses[(True, "complete_request", 200)] >= 1, summary  # its token, through a link


def test_a_token_cannot_decide_even_its_own_agents_request(people, agent):
    """The reviewers' decision endpoint takes a session (and CSRF), never an agent's token."""
    request = services.submit(services.Submission(kind="action", action_type="send_email",
                                                  params={"to": ["dana@example.com"], "subject": "s", "body": "b"}),
                              agent=agent)
    rival = Agent.objects.create(name="ops-bot", owner=people["rita"])
    for token in (issue_token(agent).secret, issue_token(rival).secret):
        response = bearer(token).post(f"/api/v1/requests/{request.pk}/decisions/",
                                      {"decision": "approve"}, format="json")
        assert response.status_code == 401, response.content
        assert response.json()["code"] == "not_authenticated"
    request.refresh_from_db()
    assert request.state == State.PENDING_APPROVAL


# --- What the stateful run (and the probes it prompted) found --------------------------------


@pytest.mark.parametrize("name", ["run_id", "idempotency_key", "state", "thread_id"])
def test_a_nul_in_a_list_filter_matches_nothing(agent, name):
    """It was a 500: PostgreSQL text cannot hold NUL, so the filtered query failed."""
    services.submit(services.Submission(kind="action", action_type="read_notes", params={}, run_id="r"), agent=agent)
    response = bearer(issue_token(agent).secret).get("/api/v1/requests/", {name: "r\x00"})
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


@pytest.mark.parametrize("body", [
    {"action_type": "x", "params": {"a": "b\x00"}},
    {"action_type": "x", "params": {"a\x00": 1}},
    {"action_type": "x", "params": {"a": [{"b": ["\x00"]}]}},
    {"action_type": "x", "target": {"a": "\x00"}},
    {"action_type": "x", "declared": {"a": "\x00"}},
])
def test_a_nul_in_a_json_field_is_a_422(agent, body):
    """It was a 500: jsonb cannot hold U+0000 ("unsupported Unicode escape sequence")."""
    response = bearer(issue_token(agent).secret).post("/api/v1/actions/", body, format="json")
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "validation_error"
    assert not ApprovalRequest.objects.exists()


def test_a_nul_in_a_result_or_idempotency_key_is_a_422(agent):
    api = bearer(issue_token(agent).secret)
    completed = api.post(f"/api/v1/requests/{uuid.uuid4()}/complete/",
                         {"token": "t", "succeeded": True, "result": {"out": "\x00"}}, format="json")
    assert completed.status_code == 422, completed.content
    keyed = api.post("/api/v1/actions/", {"action_type": "x", "idempotency_key": "k\x00"}, format="json")
    assert keyed.status_code == 422, keyed.content
    assert api.post("/api/v1/actions/", {"action_type": "x"}, format="json",
                    HTTP_IDEMPOTENCY_KEY="k\x00").status_code == 422


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_malformed_multipart_body_reaches_django_under_daphne(daphne_server, agent):
    """Twisted used to parse multipart bodies itself and answer an empty multipart message with a
    bare 400 (no body, no Content-Type) that never reached the app (controlplane/asgi.py)."""
    import requests

    secret = issue_token(agent).secret
    response = requests.post(f"{daphne_server.url}/api/v1/actions/", data=b"--b--\r\n", timeout=10, headers={
        "Authorization": f"Bearer {secret}", "Content-Type": "multipart/form-data; boundary=b"})
    assert response.headers.get("Content-Type") == "application/json", (response.status_code, response.content)
    assert response.status_code == 422 and response.json()["code"] == "validation_error"
