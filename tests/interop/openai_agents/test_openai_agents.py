"""The OpenAI Agents SDK's tool approvals decided by people, against the real SDK.

Each host (host.py) runs in its own process with the interop virtualenv: the real
`openai-agents` (pinned in requirements.txt) and the client's dependencies, the client
imported from clients/python (venv.py), from a directory outside the repository (here
`agents` is our Django app; there it is the SDK). The model is the SDK's ScriptedModel, so no
network. Reviewers answer through the reviewer JSON API of a real daphne.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from approvals import policy
from approvals.execution import runner
from approvals.models import ApprovalRequest
from approvals.people import Person
from audit.models import AuditEvent
from hitl_controlplane.client.openai_agents import EDITED_MESSAGE
from hitl_controlplane.ed25519 import SigningKey
from tests.scale.conftest import csrf_headers, session_cookies

from .venv import CLIENT, HOST

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Only bounds how long a broken test hangs; no assertion depends on how long anything takes.
HANG_GUARD_SECONDS = 60
TRANSFER = {
    "name": "transfers_one_person",
    "priority": 5,
    "action_type": "transfer_funds",
    "risk_level": "high",
    "required_approvals": 1,
    "editable_params": ["amount"],
    "conditions": [],
}


@pytest.fixture
def one_person_transfer_rule(admin_user):
    return policy.save_rule(TRANSFER, actor=Person(admin_user), note="transfers need one person")


class Host:
    """host.py in the interop venv, outside the repository, as one agent run (`run_id`)."""

    def __init__(self, python, tmp_path, daphne_server, token, public_key, run_id="run-1", **env) -> None:
        self.python = python
        self.cwd = tmp_path
        self.tool_log = tmp_path / "tool-runs.jsonl"
        self.tool_log.touch()
        self.run_id = run_id
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "CONTROLPLANE_URL": daphne_server.url,
            "CONTROLPLANE_TOKEN": token,
            "CONTROLPLANE_PUBLIC_KEYS": public_key,
            "TOOL_LOG": str(self.tool_log),
            "RUN_ID": run_id,
            **env,
        }

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(self.python), str(HOST), *args],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, process: subprocess.Popen) -> dict:
        out, err = process.communicate(timeout=HANG_GUARD_SECONDS * 2)
        assert process.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    def tool_runs(self) -> list[dict]:
        return [json.loads(line) for line in self.tool_log.read_text().splitlines()]


def calls(*specs: tuple[str, dict]) -> str:
    return json.dumps([{"call_id": call_id, "args": args} for call_id, args in specs])


def submitted(run_id: str, count: int) -> list[ApprovalRequest]:
    """The run's requests once the host has submitted `count` of them (in call-id order)."""
    give_up = time.monotonic() + HANG_GUARD_SECONDS
    while time.monotonic() < give_up:
        found = list(ApprovalRequest.objects.filter(run_id=run_id).order_by("tool_call_id"))
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the host did not submit {count} requests for {run_id}")


def decide(daphne_server, reviewer, request: ApprovalRequest, **decision) -> None:
    """A reviewer's decision through the reviewer JSON API (session + CSRF), as the dashboard sends it."""
    cookies = session_cookies(reviewer)
    decision = {"revision": ApprovalRequest.objects.get(pk=request.pk).current_revision, **decision}
    response = httpx.post(
        f"{daphne_server.url}/api/v1/requests/{request.pk}/decisions/",
        json=decision,
        headers=csrf_headers(cookies),
        timeout=HANG_GUARD_SECONDS,
    )
    assert response.status_code == 200, response.text


@pytest.fixture
def host(openai_agents_python, tmp_path, daphne_server, token, server_public_key, one_person_transfer_rule):
    def make(**overrides) -> Host:
        return Host(
            openai_agents_python,
            tmp_path,
            daphne_server,
            token,
            overrides.pop("public_key", server_public_key),
            **overrides,
        )

    return make


def test_an_approved_call_runs_the_tool_once_and_the_model_reads_its_output(host, daphne_server, people):
    agent_host = host()
    process = agent_host.start("run", "--calls", calls(("call_a", {"amount": 120, "to": "acme"})))
    [request] = submitted("run-1", 1)
    assert (request.action_type, request.tool_call_id, request.current_params()) == (
        "transfer_funds",
        "call_a",
        {"amount": 120, "to": "acme"},
    )
    decide(daphne_server, people["alice"], request, decision="approve")
    outcome = agent_host.finish(process)
    assert outcome["decisions"] == ["approved"] and outcome["verified"] == [True]
    assert agent_host.tool_runs() == [{"amount": 120, "to": "acme"}]
    assert outcome["model_saw"] == ["sent 120 to acme"] and outcome["final_output"] == "done"


def test_a_rejection_never_runs_the_tool_and_the_model_reads_the_reviewers_feedback(host, daphne_server, people):
    agent_host = host()
    process = agent_host.start("run", "--calls", calls(("call_a", {"amount": 120, "to": "acme"})))
    [request] = submitted("run-1", 1)
    decide(daphne_server, people["alice"], request, decision="reject", feedback="Acme was paid yesterday.")
    outcome = agent_host.finish(process)
    assert outcome["decisions"] == ["rejected"]
    assert agent_host.tool_runs() == []
    assert outcome["model_saw"] == ["Acme was paid yesterday."]


def test_parallel_calls_in_one_step_get_one_decision_each(host, daphne_server, people):
    agent_host = host()
    process = agent_host.start(
        "run", "--calls", calls(("call_a", {"amount": 10, "to": "acme"}), ("call_b", {"amount": 20, "to": "globex"}))
    )
    first, second = submitted("run-1", 2)
    decide(daphne_server, people["alice"], second, decision="reject", feedback="Not globex.")
    decide(daphne_server, people["alice"], first, decision="approve")
    outcome = agent_host.finish(process)
    assert outcome["decisions"] == ["approved", "rejected"]
    assert agent_host.tool_runs() == [{"amount": 10, "to": "acme"}]
    assert sorted(outcome["model_saw"]) == ["Not globex.", "sent 10 to acme"]


def test_an_approval_with_edited_arguments_asks_the_model_to_call_again(host, daphne_server, people):
    """The SDK runs a tool only with the model's arguments, so an edit cannot be applied as an approval."""
    agent_host = host()
    process = agent_host.start("run", "--calls", calls(("call_a", {"amount": 900, "to": "acme"})))
    [request] = submitted("run-1", 1)
    decide(daphne_server, people["alice"], request, decision="approve", edits={"amount": 50})
    outcome = agent_host.finish(process)
    assert agent_host.tool_runs() == []
    assert outcome["model_saw"] == [EDITED_MESSAGE.format(params='{"amount": 50, "to": "acme"}')]


def test_a_run_state_saved_as_json_is_decided_and_resumed_in_a_new_process(host, daphne_server, people, tmp_path):
    agent_host = host()
    state_file = tmp_path / "run-state.json"
    suspended = agent_host.finish(
        agent_host.start(
            "suspend", "--calls", calls(("call_a", {"amount": 75, "to": "acme"})), "--state", str(state_file)
        )
    )
    assert json.loads(state_file.read_text())  # the SDK's own serialized RunState
    [request] = submitted("run-1", 1)
    assert suspended["submitted"] == [str(request.pk)]
    decide(daphne_server, people["alice"], request, decision="approve")  # while no host process runs
    outcome = agent_host.finish(agent_host.start("resume", "--state", str(state_file), "--final", "paid"))
    assert outcome["decisions"] == ["approved"] and outcome["final_output"] == "paid"
    assert agent_host.tool_runs() == [{"amount": 75, "to": "acme"}]
    assert ApprovalRequest.objects.filter(run_id="run-1").count() == 1  # the new process found, not resubmitted


def test_a_run_state_restored_twice_runs_the_tool_once_and_the_second_reads_already_executed(
    host, daphne_server, people, tmp_path
):
    """Issue 24 (1): the same saved RunState resumed in two processes. The SDK runs the approved
    tool in each; the handshake inside the wrapped tool lets only the first claim run it."""
    agent_host = host()
    state_file = tmp_path / "run-state.json"
    agent_host.finish(
        agent_host.start(
            "suspend", "--calls", calls(("call_a", {"amount": 75, "to": "acme"})), "--state", str(state_file)
        )
    )
    [request] = submitted("run-1", 1)
    decide(daphne_server, people["alice"], request, decision="approve")
    first = agent_host.finish(agent_host.start("resume", "--state", str(state_file), "--final", "paid"))
    second = agent_host.finish(agent_host.start("resume", "--state", str(state_file), "--final", "paid"))
    assert agent_host.tool_runs() == [{"amount": 75, "to": "acme"}]
    assert first["model_saw"] == ["sent 75 to acme"]
    assert second["model_saw"] == [f"Not run: already executed (request {request.pk}, succeeded/succeeded)"]
    request.refresh_from_db()
    assert (request.state, request.resolution_code, request.attempts) == ("succeeded", "succeeded", 1)
    verbs = set(AuditEvent.objects.filter(request_id=request.pk).values_list("verb", flat=True))
    assert "request.succeeded" in verbs and "request.expired" not in verbs


def test_an_edited_approval_applied_by_the_host_runs_the_wrapped_tool_with_the_edited_arguments(
    host, daphne_server, people, tmp_path
):
    """A host that approves the item itself (no decide_interruptions): the SDK hands the tool the
    model's arguments, but the wrapped tool runs only what the server grants, the reviewer's edit."""
    agent_host = host()
    state_file = tmp_path / "run-state.json"
    agent_host.finish(
        agent_host.start(
            "suspend", "--calls", calls(("call_a", {"amount": 900, "to": "acme"})), "--state", str(state_file)
        )
    )
    [request] = submitted("run-1", 1)
    decide(daphne_server, people["alice"], request, decision="approve", edits={"amount": 50})
    agent_host.env["APPROVE_DIRECTLY"] = "1"
    outcome = agent_host.finish(agent_host.start("resume", "--state", str(state_file)))
    assert agent_host.tool_runs() == [{"amount": 50, "to": "acme"}]
    assert outcome["model_saw"] == ["sent 50 to acme"]
    request.refresh_from_db()
    assert (request.state, request.attempts) == ("succeeded", 1)


def test_a_host_killed_between_claim_and_complete_ends_outcome_unknown_and_is_never_run_again(
    openai_agents_python, short_lease_server, token, server_public_key, one_person_transfer_rule, people, tmp_path
):
    agent_host = Host(openai_agents_python, tmp_path, short_lease_server, token, server_public_key)
    state_file = tmp_path / "run-state.json"
    agent_host.finish(
        agent_host.start(
            "suspend", "--calls", calls(("call_a", {"amount": 75, "to": "acme"})), "--state", str(state_file)
        )
    )
    [request] = submitted("run-1", 1)
    decide(short_lease_server, people["alice"], request, decision="approve")
    agent_host.env["KILL_IN_TOOL"] = "1"
    killed = agent_host.start("resume", "--state", str(state_file))
    killed.communicate(timeout=HANG_GUARD_SECONDS)
    assert killed.returncode == -9  # killed in the tool: claimed, never completed
    assert ApprovalRequest.objects.get(pk=request.pk).state == "executing"
    time.sleep(2.1)  # the 2 s lease runs out; nobody renews it
    assert runner.resolve_executions() == {"retried": 0, "lost": 1}
    request.refresh_from_db()
    assert (request.state, request.resolution_code) == ("failed", "outcome_unknown")
    del agent_host.env["KILL_IN_TOOL"]
    again = agent_host.finish(agent_host.start("resume", "--state", str(state_file)))
    assert again["model_saw"] == [f"Not run: already executed (request {request.pk}, failed/outcome_unknown)"]
    assert agent_host.tool_runs() == [{"amount": 75, "to": "acme"}]  # the killed run only
    verbs = set(AuditEvent.objects.filter(request_id=request.pk).values_list("verb", flat=True))
    assert "request.expired" not in verbs


@pytest.mark.parametrize(
    "attack, refused_for",
    [
        ({"TAMPER": "claim-params"}, "not the granted ones"),
        ({"public_key": SigningKey.from_secret("an attacker's key").public_text}, "does not trust"),
        ({"TAMPER": "params"}, "payload_sha256"),
    ],
)
def test_a_forged_or_altered_decision_is_refused_and_nothing_runs(host, daphne_server, people, attack, refused_for):
    agent_host = host(**attack)
    process = agent_host.start("run", "--calls", calls(("call_a", {"amount": 120, "to": "acme"})))
    [request] = submitted("run-1", 1)
    decide(daphne_server, people["alice"], request, decision="approve")
    outcome = agent_host.finish(process)
    assert refused_for in outcome["refused"]
    assert agent_host.tool_runs() == []


def test_a_submission_answer_naming_an_older_approval_runs_nothing(host, daphne_server, people, token):
    """Issue 22 (5): the same agent's same call (tool-call id, params), approved in an earlier run;
    a proxy rewrites the new submission's answer to name it. Only the idempotency key differs."""
    older = httpx.post(
        f"{daphne_server.url}/api/v1/actions/",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "oai-run-0-call_a"},
        timeout=HANG_GUARD_SECONDS,
        json={
            "action_type": "transfer_funds",
            "params": {"amount": 120, "to": "acme"},
            "tool_call_id": "call_a",
            "run_id": "run-0",
        },
    )
    assert older.status_code == 201, older.text
    [old] = submitted("run-0", 1)
    decide(daphne_server, people["alice"], old, decision="approve")
    agent_host = host(TAMPER=f"id:{old.pk}")
    outcome = agent_host.finish(agent_host.start("run", "--calls", calls(("call_a", {"amount": 120, "to": "acme"}))))
    assert "idempotency_key" in outcome["refused"]
    assert agent_host.tool_runs() == []
    old.refresh_from_db()
    assert (old.state, old.attempts) == ("approved", 0)


def test_the_client_imports_beside_the_sdk_from_this_tree(openai_agents_python, tmp_path):
    """The venv resolved the SDK and the client's declared dependencies together (venv.py); the
    SDK comes from its site-packages, the client from this tree (its .pth), neither from ours."""
    code = (
        "import agents, hitl_controlplane.client, hitl_controlplane.verify, hitl_controlplane.client.openai_agents;"
        "from agents import Runner, RunState; print(agents.__file__); print(hitl_controlplane.client.__file__)"
    )
    out = subprocess.run(
        [str(openai_agents_python), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout.splitlines()
    assert "site-packages" in out[0] and sys.prefix not in out[0], out
    assert out[1] == str(CLIENT.resolve() / "hitl_controlplane" / "client" / "__init__.py"), out
