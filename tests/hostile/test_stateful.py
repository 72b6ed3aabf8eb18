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
The links, the ledger and the machine builder live in tests/hostile/stateful.py.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky

from agents.models import Agent
from agents.services import issue_token
from approvals import policy, services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State
from tests.api.conftest import bearer

from .stateful import ID_OPERATIONS, Ledger, build_machine, linked_schema

# Bounded by count: 100 scenarios of up to 30 steps (about 30 s here). 60 of 20 was enough
# until the submission bodies grew (reason, context, allowed_decisions, batch_id): more of
# the generated ones are 422, and a run reached a cross-agent `complete` only about twice,
# in CI not at all (submit, claim and complete must follow each other in one scenario).
MAX_EXAMPLES = 100
STEPS = 30


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
def stateful_cast(people, admin_user):
    """Owners of the scenarios' agents (owen for A, rita for B), reviewers alice and bob, and a
    policy under which generated actions auto-approve."""
    policy.save_rule(ANY_ACTION_IS_LOW, actor=Person(admin_user), note="stateful run: generated actions auto-approve")
    return {"owners": {"A": people["owen"], "B": people["rita"]}, "reviewers": [people["alice"], people["bob"]]}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_agents_stateful_run(stateful_server, stateful_cast):
    with urllib.request.urlopen(f"{stateful_server.url}/api/schema/?format=json") as published:
        document = json.load(published)
    ledger = Ledger()
    machine = build_machine(linked_schema(document), stateful_server.url, stateful_cast, ledger)

    try:
        machine.run(
            settings=settings(
                max_examples=MAX_EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
        )
    except Exception as exc:
        if ledger.failures:  # the first failure, whatever hypothesis made of the replay
            raise AssertionError(f"first failure of {len(ledger.failures)}: {ledger.failures[0]}") from exc
        if not isinstance(exc, Flaky):
            raise
        # No check failed, but the server answered one replayed step differently (its state
        # moves on); schemathesis's own runner treats that as no failure too. The run stops
        # there, and the coverage asserts below say whether it got far enough.
        print(f"hypothesis stopped the run as flaky after {sum(ledger.statuses.values())} calls: {exc}")

    summary = "\n".join(
        f"{'own' if own else 'other'} {op} {status}: {n}"
        for (own, op, status), n in sorted(ledger.statuses.items(), key=str)
    )
    print(f"\n{summary}\ncross-agent probes: {dict(ledger.cross_probes)}")
    # The run reached what it is for (otherwise a passing run would prove little):
    creators = {name.rsplit("-", 1)[1] for name in ledger.owner.values()}
    assert creators == {"A", "B"}, summary  # both agents of a scenario submit
    assert set(ID_OPERATIONS) <= set(ledger.cross_probes), ledger.cross_probes  # each tried on another's request
    assert ledger.statuses[(True, "claim_request", 200)] >= 1, summary  # a grant, through a link
    assert ledger.statuses[(True, "complete_request", 200)] >= 1, summary  # its token, through a link


def test_a_token_cannot_decide_even_its_own_agents_request(people, agent):
    """The reviewers' decision endpoint takes a session (and CSRF), never an agent's token."""
    request = services.submit(
        services.Submission(
            kind="action", action_type="send_email", params={"to": ["dana@example.com"], "subject": "s", "body": "b"}
        ),
        agent=agent,
    )
    rival = Agent.objects.create(name="ops-bot", owner=people["rita"])
    for token in (issue_token(agent).secret, issue_token(rival).secret):
        response = bearer(token).post(
            f"/api/v1/requests/{request.pk}/decisions/", {"decision": "approve", "revision": 1}, format="json"
        )
        assert response.status_code == 401, response.content
        assert response.json()["code"] == "not_authenticated"
    request.refresh_from_db()
    assert request.state == State.PENDING_APPROVAL


# --- What the stateful run (and the probes it prompted) found --------------------------------


@pytest.mark.parametrize("name", ["run_id", "idempotency_key", "state", "thread_id"])
def test_a_nul_in_a_list_filter_is_refused_naming_it(agent, name):
    """It was a 500: PostgreSQL text cannot hold NUL, so the filtered query failed."""
    services.submit(services.Submission(kind="action", action_type="read_notes", params={}, run_id="r"), agent=agent)
    response = bearer(issue_token(agent).secret).get("/api/v1/requests/", {name: "r\x00"})
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_input" and response.json()["details"]["field"] == name


@pytest.mark.parametrize(
    "body",
    [
        {"action_type": "x", "params": {"a": "b\x00"}},
        {"action_type": "x", "params": {"a\x00": 1}},
        {"action_type": "x", "params": {"a": [{"b": ["\x00"]}]}},
        {"action_type": "x", "target": {"a": "\x00"}},
        {"action_type": "x", "declared": {"a": "\x00"}},
    ],
)
def test_a_nul_in_a_json_field_is_refused(agent, body):
    """It was a 500: jsonb cannot hold U+0000 ("unsupported Unicode escape sequence")."""
    response = bearer(issue_token(agent).secret).post("/api/v1/actions/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_input"
    assert not ApprovalRequest.objects.exists()


def test_a_nul_in_a_result_or_idempotency_key_is_refused(agent):
    api = bearer(issue_token(agent).secret)
    completed = api.post(
        f"/api/v1/requests/{uuid.uuid4()}/complete/",
        {"token": "t", "succeeded": True, "result": {"out": "\x00"}},
        format="json",
    )
    assert completed.status_code == 400 and completed.json()["details"]["field"] == "result.out"
    keyed = api.post("/api/v1/actions/", {"action_type": "x", "idempotency_key": "k\x00"}, format="json")
    assert keyed.status_code == 400 and keyed.json()["details"]["field"] == "idempotency_key"
    assert (
        api.post("/api/v1/actions/", {"action_type": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k\x00").status_code
        == 422
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_malformed_multipart_body_reaches_django_under_daphne(daphne_server, agent):
    """Twisted used to parse multipart bodies itself and answer an empty multipart message with a
    bare 400 (no body, no Content-Type) that never reached the app (controlplane/asgi.py)."""
    import requests

    secret = issue_token(agent).secret
    response = requests.post(
        f"{daphne_server.url}/api/v1/actions/",
        data=b"--b--\r\n",
        timeout=10,
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert response.headers.get("Content-Type") == "application/json", (response.status_code, response.content)
    assert response.status_code == 422 and response.json()["code"] == "validation_error"
