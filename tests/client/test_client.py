"""The Python client against a real daphne server: submit, wait, decorate, retry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from agents.resume import PLAN_APPROVED_TEXT
from approvals import services
from approvals.models import ApprovalRequest
from hitl_controlplane.client import (
    ApprovalRejected,
    ApprovalTimeout,
    AsyncControlPlane,
    ControlPlane,
    ControlPlaneError,
    submit_plan,
)
from tests.fixtures.revisions import current_revision
from tests.live import ROOT

from .conftest import HANG_GUARD_SECONDS, AsyncNotingTransport, NotingTransport

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PLAN = "# Add dark mode\n\n1. Add a theme toggle.\n2. Persist the choice.\n"


@pytest.fixture
def cp(daphne_server, token, long_polls):
    """mail-bot's client; a reviewer thread (`reviewer_decides`) sees its long-polls leave."""
    with ControlPlane(
        daphne_server.url, token, poll_wait=5, retry_backoff=0.05, transport=NotingTransport(long_polls)
    ) as client:
        yield client


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "dark-mode.md"
    path.write_text(PLAN)
    return str(path)


def test_submit_plan_reads_the_file_waits_and_returns_mastras_texts(cp, plan_file, people, reviewer_decides):
    reviewer_decides(
        lambda request: services.approve(
            request.pk, revision=current_revision(request.pk), actor=services.Person(people["alice"])
        )
    )
    resume = cp.submit_plan(plan_file, timeout=15)
    assert resume.approved and resume.state == "approved"
    assert resume.tool_result == PLAN_APPROVED_TEXT
    assert resume.resume_data == {"action": "approved", "path": plan_file, "title": "Add dark mode", "plan": PLAN}


def test_the_submit_plan_tool_returns_the_rejection_for_the_model(cp, plan_file, people, reviewer_decides):
    reviewer_decides(
        lambda r: services.reject(
            r.pk,
            revision=current_revision(r.pk),
            actor=services.Person(people["alice"]),
            feedback="Add error handling steps",
        )
    )
    text = submit_plan(plan_file, client=cp, timeout=15)
    assert "Add error handling steps" in text and "submit_plan" in text


def test_the_submit_plan_tool_without_a_control_plane_returns_the_fallback(monkeypatch):
    monkeypatch.delenv("CONTROLPLANE_URL", raising=False)
    monkeypatch.delenv("CONTROLPLANE_TOKEN", raising=False)
    assert submit_plan(".plans/x.md") == "[Plan submitted for review] .plans/x.md"


def test_require_approval_runs_the_function_with_the_edited_params(cp, people, transfer_rule, reviewer_decides):
    calls = []

    @cp.require_approval("transfer_funds", target={"account": "ops"})
    def transfer(amount: int, to: str = "acme") -> str:
        calls.append((amount, to))
        return f"sent {amount} to {to}"

    reviewer_decides(
        lambda r: services.approve_with_edits(
            r.pk, revision=current_revision(r.pk), actor=services.Person(people["alice"]), edits={"amount": 500}
        )
    )
    assert transfer(900) == "sent 500 to acme"
    assert calls == [(500, "acme")]
    request = ApprovalRequest.objects.get()
    assert request.state == "succeeded" and request.result == "sent 500 to acme"


def test_require_approval_raises_with_the_feedback_and_never_runs(cp, people, reviewer_decides):
    calls = []

    @cp.require_approval()
    def update_document(doc: str, text: str) -> None:
        calls.append(doc)

    reviewer_decides(
        lambda r: services.reject(
            r.pk, revision=current_revision(r.pk), actor=services.Person(people["bob"]), feedback="Not that document"
        )
    )
    with pytest.raises(ApprovalRejected) as raised:
        update_document("handbook", "new text")
    assert raised.value.feedback == "Not that document" and raised.value.state == "rejected"
    assert calls == []
    assert ApprovalRequest.objects.get().action_type == "update_document"


def test_a_failing_tool_is_reported_as_failed(cp):
    @cp.require_approval("read_notes")  # low risk: approved at once
    def read_notes(path: str) -> str:
        raise OSError("disk on fire")

    with pytest.raises(OSError):
        read_notes("a.txt")
    request = ApprovalRequest.objects.get()
    assert request.state == "failed" and "disk on fire" in request.error


def test_waiting_can_time_out(cp):
    submitted = cp.submit_action("update_document", {"doc": "x"}, {"text": "y"})
    with pytest.raises(ApprovalTimeout):
        cp.wait(submitted["id"], timeout=0.5)


def test_a_host_that_runs_calls_as_submitted_says_so(cp):
    fixed = cp.submit_action("send_email", params={"to": ["dana@example.com"]}, allowed_decisions=["approve", "reject"])
    default = cp.submit_action("send_email", params={"to": ["dana@example.com"]})
    assert (fixed["allowed_decisions"], default["allowed_decisions"]) == (
        ["approve", "reject"],
        ["approve", "edit", "reject"],
    )
    assert not ApprovalRequest.objects.get(pk=fixed["id"]).allows("edit")


def test_server_refusals_surface_their_code(cp, daphne_server):
    with pytest.raises(ControlPlaneError) as raised:
        cp.submit_action("bad type!")
    assert raised.value.code == "validation_error" and raised.value.status == 422
    with ControlPlane(daphne_server.url, "cp_nope_nope") as stranger, pytest.raises(ControlPlaneError) as refused:
        stranger.find()
    assert refused.value.code == "invalid_token"


def test_async_client_and_decorator(daphne_server, token, people, long_polls, reviewer_decides):
    async def scenario() -> tuple:
        async with AsyncControlPlane(
            daphne_server.url, token, poll_wait=5, transport=AsyncNotingTransport(long_polls)
        ) as acp:

            @acp.require_approval("update_document", claim=False)
            async def update_document(doc: str) -> str:
                return f"updated {doc}"

            reviewer_decides(
                lambda r: services.approve(
                    r.pk, revision=current_revision(r.pk), actor=services.Person(people["alice"])
                )
            )
            return await update_document("handbook"), await acp.find(action_type="update_document")

    result, found = asyncio.run(scenario())
    assert result == "updated handbook" and len(found) == 1


def test_a_dropped_connection_mid_wait_is_retried_and_finds_the_same_request(proxy, token, people):
    with ControlPlane(proxy.url, token, poll_wait=10, retry_backoff=0.05) as cp:
        submitted = cp.submit_action("update_document", {"doc": "handbook"}, {"text": "v2"})
        outcome: dict = {}
        waiter = threading.Thread(target=lambda: outcome.update(resume=cp.wait(submitted["id"], timeout=20)))
        waiter.start()
        proxy.wait_for_requests(b"/resume/")  # the agent's long-poll has reached the server
        connections_before = proxy.accepted
        proxy.drop_all()  # the agent's long-poll dies mid-wait
        proxy.wait_for_requests(b"/resume/", count=2)  # and the client polls again
        services.approve(
            submitted["id"], revision=current_revision(submitted["id"]), actor=services.Person(people["alice"])
        )
        waiter.join(timeout=HANG_GUARD_SECONDS + 5)
    assert outcome["resume"].request_id == submitted["id"] and outcome["resume"].approved
    assert proxy.accepted > connections_before  # it reconnected
    assert ApprovalRequest.objects.count() == 1


def test_a_lost_submit_response_is_retried_with_the_same_idempotency_key(proxy, token):
    with ControlPlane(proxy.url, token, retry_backoff=0.05) as cp:
        proxy.swallow_responses = 1  # the server creates the request; the client never hears back
        submitted = cp.submit_action("update_document", {"doc": "handbook"}, {"text": "v3"})
    assert ApprovalRequest.objects.count() == 1
    assert str(ApprovalRequest.objects.get().pk) == submitted["id"]


def test_the_client_imports_without_django():
    code = (
        "import sys; sys.modules['django'] = None; import hitl_controlplane.client as c; print(c.submit_plan('p.md'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[Plan submitted for review] p.md"


CLAIMS_CONTEXT = {
    "links": [{"label": "Run 7", "url": "https://ci.example.com/runs/7"}],
    "turns": [{"role": "user", "text": "Please update the handbook."}],
}


def test_request_approval_carries_the_agents_reason_and_context(cp, people, reviewer_decides):
    reviewer_decides(
        lambda r: services.approve(r.pk, revision=current_revision(r.pk), actor=services.Person(people["alice"]))
    )
    resume = cp.request_approval(
        "update_document",
        {"doc": "handbook"},
        {"text": "v2"},
        reason="The user asked for v2.",
        context=CLAIMS_CONTEXT,
        timeout=30,
    )
    assert resume.approved
    stored = ApprovalRequest.objects.get()
    assert (stored.reason, stored.context) == ("The user asked for v2.", CLAIMS_CONTEXT)


def test_the_async_client_sends_them_too(daphne_server, token):
    async def scenario() -> dict:
        async with AsyncControlPlane(daphne_server.url, token) as acp:
            return await acp.submit_action(
                "update_document", {"doc": "x"}, {"text": "y"}, reason="Because.", context=CLAIMS_CONTEXT
            )

    submitted = asyncio.run(scenario())
    assert submitted["reason"] == "Because." and submitted["context"] == CLAIMS_CONTEXT
