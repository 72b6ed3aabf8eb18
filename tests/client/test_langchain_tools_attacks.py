"""Someone between a LangChain host and a real daphne, in both interrupt modes.

The host (tests/client/langchain_host.py: the real `HumanInTheLoopMiddleware`, the tool
wrapped with `controlled_langchain_tool`) runs as its own process; a loopback proxy
(tests/fixtures/typescript.RewritingProxy) rewrites one kind of answer: the signed resume
(params, verdict), the submission answer (another approved request of the same agent),
the claim answer (params, the decision presented as the grant), or a second process's
refused claim answered with the first process's grant. Each time the client raises
DecisionRefused, the tool never runs (or, for the replay, runs only the once it was
allowed to), and no call that ran is ever recorded as expired.
"""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from hitl_controlplane.client import ControlPlane
from hitl_controlplane.client._core import submitted_id
from tests.client.langchain_host import ARGS
from tests.client.langchain_processes import LangChainHost
from tests.client.test_langgraph_tools import decide
from tests.fixtures.typescript import (
    ClaimTampering,
    RewritingProxy,
    alter_resume_params,
    alter_resume_verdict,
    swap_submission_id,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MODES = ["batched", "per_call"]


@pytest.fixture
def langchain_host(daphne_server, token, server_public_key, transfer_rule, tmp_path):
    """`langchain_host(mode)`: a LangChain host process pair on one checkpoint, as mail-bot, the key pinned."""
    return lambda mode: LangChainHost(daphne_server, token, server_public_key, tmp_path, mode)


@pytest.fixture
def proxied(daphne_server):
    """`proxied(rewrite)`: a RewritingProxy to daphne, closed after the test."""
    opened: list[RewritingProxy] = []

    def _open(rewrite) -> RewritingProxy:
        opened.append(RewritingProxy(daphne_server.port, rewrite))
        return opened[-1]

    yield _open
    for proxy in opened:
        proxy.close()


def verbs(request_id) -> set[str]:
    return set(AuditEvent.objects.filter(request_id=request_id).values_list("verb", flat=True))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("rewrite", "decision"),
    [(alter_resume_params, "approve"), (alter_resume_verdict, "reject")],
    ids=["params", "verdict"],
)
def test_a_resume_answer_altered_in_transit_is_refused_before_the_middleware_is_answered(
    langchain_host, proxied, daphne_server, people, mode, rewrite, decision
):
    host = langchain_host(mode)
    proxy = proxied(rewrite)
    request, printed = host.started_and_decided(
        daphne_server.url, people["alice"], decision=decision, CONTROLPLANE_URL=proxy.url
    )
    assert printed["refused"].startswith(f"request {request.pk}: the signed decision's"), printed
    assert host.tool_runs() == []
    request.refresh_from_db()
    assert (request.state, request.attempts) == ("approved" if decision == "approve" else "rejected", 0)


@pytest.mark.parametrize("mode", MODES)
def test_the_tool_refuses_a_resume_altered_in_transit_after_an_honest_start(
    langchain_host, proxied, daphne_server, people, mode
):
    """The start was honest; the process that restores the checkpoint reads an altered resume in the tool."""
    host = langchain_host(mode)
    request = host.started_and_approved(daphne_server.url, people["alice"])
    printed = host.finish(host.start("resume", CONTROLPLANE_URL=proxied(alter_resume_params).url))
    assert printed["refused"].startswith(f"request {request.pk}: the signed decision's"), printed
    assert host.tool_runs() == []
    request.refresh_from_db()
    assert (request.state, request.attempts) == ("approved", 0)  # never claimed


@pytest.mark.parametrize("mode", MODES)
def test_a_submission_answer_naming_another_approved_request_is_refused(
    langchain_host, proxied, daphne_server, people, token, mode
):
    """The same agent's transfer with the same args, approved earlier for another call and never
    run: its id swapped into the submission answer. Its signed decision names the other call."""
    with ControlPlane(daphne_server.url, token) as honest:
        old_id = submitted_id(honest.submit_action("transfer_funds", params=ARGS, tool_call_id="call_older"))
    decide(daphne_server.url, people["alice"], old_id, decision="approve")
    host = langchain_host(mode)
    process = host.start("start", CONTROLPLANE_URL=proxied(swap_submission_id(old_id)).url)
    printed = host.finish(process)
    assert printed["refused"].startswith(f"request {old_id}: the signed decision's"), printed
    assert host.tool_runs() == []
    old = ApprovalRequest.objects.get(pk=old_id)
    assert (old.state, old.attempts) == ("approved", 0)
    assert (host.submitted().state, host.submitted().attempts) == ("pending_approval", 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tampering", "refused_for"),
    [("alter_params", "not the granted ones"), ("decision_as_grant", "grant_signature does not match")],
)
def test_a_claim_answer_altered_in_transit_is_refused_in_the_tool_and_nothing_runs(
    langchain_host, proxied, daphne_server, people, mode, tampering, refused_for
):
    host = langchain_host(mode)
    request = host.started_and_approved(daphne_server.url, people["alice"])
    proxy = proxied(getattr(ClaimTampering(), tampering))
    printed = host.finish(host.start("resume", CONTROLPLANE_URL=proxy.url))
    assert refused_for in printed["refused"], printed
    assert host.tool_runs() == []
    request.refresh_from_db()
    assert request.state != "succeeded" and request.attempts == 1  # claimed by the server, never run here
    assert "request.succeeded" not in verbs(request.pk)


@pytest.mark.parametrize("mode", MODES)
def test_the_first_processs_grant_replayed_to_a_second_process_is_refused(
    langchain_host, proxied, daphne_server, people, mode
):
    host = langchain_host(mode)
    request = host.started_and_approved(daphne_server.url, people["alice"])
    proxy = proxied(ClaimTampering().replay_first_grant)
    first = host.finish(host.start("resume", CONTROLPLANE_URL=proxy.url))
    second = host.finish(host.start("resume", CONTROLPLANE_URL=proxy.url))
    assert first["model_read"] == ["sent 75 to acme"]
    assert "nonce" in second["refused"], second
    assert host.tool_runs() == [ARGS]
    request.refresh_from_db()
    assert (request.state, request.attempts) == ("succeeded", 1)
    assert "request.expired" not in verbs(request.pk)
