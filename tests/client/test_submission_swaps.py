"""A submission answer naming another approved request of the same agent, against a real daphne.

Issue 24's "Done means" (request id altered in the submission answer) for the Python
helpers over the network: a proxy (an httpx transport in front of the real server) swaps
the id of an earlier approved request of the same agent, tool and params into the answer.
The signed decision the helper then reads names the other call's idempotency key, so it is
DecisionRefused, nothing is claimed and the tool never runs. (tests/guards/
test_client_binding_swaps.py tells the same story in process, for every client entry.)
"""

from __future__ import annotations

import json

import httpx
import pytest
from langgraph.types import Command

from approvals import services
from approvals.models import ApprovalRequest
from approvals.people import Person
from hitl_controlplane.client import ControlPlane, DecisionRefused
from hitl_controlplane.client._core import submitted_id
from hitl_controlplane.client.langgraph_tools import answer_approvals
from tests.client import langgraph_host
from tests.fixtures.revisions import current_revision

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PARAMS = {"amount": 120, "to": "acme"}


class SubmissionSwap(httpx.HTTPTransport):
    """Passes everything to daphne; the answer to an action's submission names `other_id`."""

    def __init__(self, other_id: str) -> None:
        super().__init__()
        self.other_id = other_id
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path))
        response = super().handle_request(request)
        if request.method != "POST" or request.url.path != "/api/v1/actions/" or response.status_code >= 300:
            return response
        body = json.loads(response.read())
        body["id"] = self.other_id
        return httpx.Response(response.status_code, json=body)


def client(daphne_server, token, key, **options) -> ControlPlane:
    return ControlPlane(daphne_server.url, token, poll_wait=5, public_keys=[key], **options)


def an_older_approval(daphne_server, token, key, reviewer, **submission) -> str:
    """The same agent's call of the same tool with the same params, approved and never run."""
    with client(daphne_server, token, key) as honest:
        old_id = submitted_id(honest.submit_action("transfer_funds", params=PARAMS, **submission))
    services.approve(old_id, revision=current_revision(old_id), actor=Person(reviewer))
    return old_id


def untouched(request_id: str) -> None:
    request = ApprovalRequest.objects.get(pk=request_id)
    assert (request.state, request.attempts, request.result) == ("approved", 0, None)


def test_the_decorator_refuses_a_submission_answer_naming_another_approval(
    daphne_server, token, server_public_key, people, transfer_rule
):
    old_id = an_older_approval(daphne_server, token, server_public_key, people["alice"])
    swap, runs = SubmissionSwap(old_id), []
    with client(daphne_server, token, server_public_key, transport=swap) as cp:

        @cp.require_approval("transfer_funds")
        def transfer_funds(amount: int, to: str) -> str:
            runs.append({"amount": amount, "to": to})
            return "sent"

        with pytest.raises(DecisionRefused, match="idempotency_key"):
            transfer_funds(**PARAMS)
    assert runs == []
    assert ("GET", f"/api/v1/requests/{old_id}/resume/") in swap.sent  # the swap was followed, then refused
    assert ("POST", f"/api/v1/requests/{old_id}/claim/") not in swap.sent
    untouched(old_id)


def test_a_langgraph_resume_refuses_a_submission_answer_naming_another_approval(
    daphne_server, token, server_public_key, people, transfer_rule
):
    """The resumed node submits its call again (idempotent) to find its request: that answer is swapped."""
    old_id = an_older_approval(
        daphne_server, token, server_public_key, people["alice"], tool_call_id="call_1", run_id="run-older"
    )
    runs: list[dict] = []
    saver = langgraph_host.InMemorySaver()
    with client(daphne_server, token, server_public_key) as cp:
        graph = langgraph_host.build_graph(cp, lambda **params: runs.append(params), saver=saver)
        state = graph.invoke({"messages": [("user", "Pay acme.")]}, langgraph_host.CONFIG)
        request_id = state["__interrupt__"][0].value["request_id"]
    services.approve(request_id, revision=current_revision(request_id), actor=Person(people["alice"]))
    swap = SubmissionSwap(old_id)
    with client(daphne_server, token, server_public_key, transport=swap) as cp:
        graph = langgraph_host.build_graph(cp, lambda **params: runs.append(params), saver=saver)
        answers = answer_approvals(cp, graph.get_state(langgraph_host.CONFIG).interrupts, timeout=30)
        with pytest.raises(DecisionRefused, match="idempotency_key"):
            graph.invoke(Command(resume=answers), langgraph_host.CONFIG)
    assert runs == []
    assert ("GET", f"/api/v1/requests/{old_id}/resume/") in swap.sent  # the swap was followed, then refused
    assert not [path for method, path in swap.sent if path.endswith("/claim/")]
    untouched(old_id)
    untouched(request_id)
