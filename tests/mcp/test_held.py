"""Held calls end to end: the SDK's client calls a tool reviewers must decide, hears
"pending", a reviewer decides through the services, and the client's retry (the
same call again) gets the outcome. The demo upstream counts what really ran.

The gateway here holds a call one second (`MCP_HOLD_SECONDS=1`, tests/mcp/conftest.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from approvals import services
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State

from .conftest import _start_gateway
from .test_gateway import ERAS, gateway, run, text_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

NOTE = {"to": "dana", "text": "the build is green"}


def call(server, token, tool: str, arguments: dict, *, mode: str = "auto", progress: list | None = None, meta=None):
    async def calling():
        async with gateway(server, token, mode=mode) as client:

            async def heard(done, total, message):
                if progress is not None:
                    progress.append(message)

            return await client.call_tool(tool, arguments, progress_callback=heard, meta=meta)

    return run(calling())


def the_request(action_type: str = "demo.send_note") -> ApprovalRequest:
    return ApprovalRequest.objects.get(action_type=action_type)


def approve(people, request: ApprovalRequest) -> None:
    services.approve(request.pk, revision=request.current_revision, actor=Person(people["alice"]))


@pytest.mark.parametrize("mode", ERAS)
def test_an_approved_call_runs_once_on_the_retry_and_the_next_retry_gets_the_kept_result(
    gateway_server, token, gateway_rules, upstream_calls, people, mode
):
    heard: list[str] = []
    pending = call(gateway_server, token, "demo.send_note", NOTE, mode=mode, progress=heard)
    request = the_request()
    again = call(gateway_server, token, "demo.send_note", NOTE, mode=mode)

    assert pending.is_error and f"Pending approval, request {request.pk}: call again" in text_of(pending)
    assert f"Pending approval, request {request.pk}" in text_of(again)  # the same request, not a new one
    assert ApprovalRequest.objects.filter(action_type="demo.send_note").count() == 1
    assert heard and f"/requests/{request.pk}/" in heard[0]  # the client is told where it is decided
    assert upstream_calls() == []

    approve(people, request)
    ran = call(gateway_server, token, "demo.send_note", NOTE, mode=mode)
    retried = call(gateway_server, token, "demo.send_note", NOTE, mode=mode)

    assert not ran.is_error and text_of(ran) == "note sent to dana"
    assert upstream_calls() == [("send_note", NOTE)]  # once
    assert retried.model_dump() == ran.model_dump()  # the kept result, not a second call
    assert upstream_calls() == [("send_note", NOTE)]
    request.refresh_from_db()
    assert (request.state, request.attempts) == (State.SUCCEEDED, 1)
    assert set(request.result) == {"sha256", "bytes", "is_error"}


def test_a_call_approved_while_it_is_held_runs_within_the_same_call(
    gateway_server, token, gateway_rules, upstream_calls, people
):
    call(gateway_server, token, "demo.send_note", NOTE)
    request = the_request()
    timer = threading.Timer(0.3, approve, args=(people, request))

    timer.start()
    try:
        held_then_run = call(gateway_server, token, "demo.send_note", NOTE)
    finally:
        timer.join()

    assert text_of(held_then_run) == "note sent to dana"
    assert upstream_calls() == [("send_note", NOTE)]


def test_an_edited_approval_reaches_the_upstream_with_the_edited_arguments(
    gateway_server, token, gateway_rules, upstream_calls, people
):
    call(gateway_server, token, "demo.send_note", NOTE)
    request = the_request()
    services.approve_with_edits(
        request.pk, revision=request.current_revision, actor=Person(people["alice"]), edits={"text": "toned down"}
    )

    ran = call(gateway_server, token, "demo.send_note", NOTE)  # the agent retries what it asked for

    assert text_of(ran) == "note sent to dana"
    assert upstream_calls() == [("send_note", {"to": "dana", "text": "toned down"})]


def test_a_rejection_answers_the_retry_with_the_reviewers_feedback_and_nothing_runs(
    gateway_server, token, gateway_rules, upstream_calls, people
):
    call(gateway_server, token, "demo.send_note", NOTE)
    request = the_request()
    services.reject(
        request.pk, revision=request.current_revision, actor=Person(people["alice"]), feedback="Ask Dana first."
    )

    refused = call(gateway_server, token, "demo.send_note", NOTE)

    assert refused.is_error
    assert "Rejected. Feedback from the reviewer:\n\nAsk Dana first." in text_of(refused)
    assert "Do not retry the same call unchanged" in text_of(refused) and str(request.pk) in text_of(refused)
    assert upstream_calls() == []


def test_a_request_expired_undecided_answers_the_retry_that_it_expired(
    gateway_server, token, gateway_rules, upstream_calls
):
    call(gateway_server, token, "demo.send_note", NOTE)
    request = the_request()
    ApprovalRequest.objects.filter(pk=request.pk).update(decide_by=timezone.now() - timedelta(seconds=1))
    assert services.expire(request.pk)

    answer = call(gateway_server, token, "demo.send_note", NOTE)

    assert answer.is_error and "expired before anyone decided it" in text_of(answer)
    assert ApprovalRequest.objects.filter(action_type="demo.send_note").count() == 1
    assert upstream_calls() == []


def test_a_tool_redefined_after_approval_is_refused_at_execution(
    gateway_server, token, gateway_rules, upstream_calls, people
):
    call(gateway_server, token, "demo.send_note", NOTE)
    request = the_request()
    approve(people, request)
    original = "Pretend to send a short note (the demo's held tool)."
    call(gateway_server, token, "demo.redefine", {"description": "Sends the note to everyone you know."})
    try:
        refused = call(gateway_server, token, "demo.send_note", NOTE)
    finally:
        call(gateway_server, token, "demo.redefine", {"description": original})

    assert refused.is_error and "target_changed_reapproval_required" in text_of(refused)
    request.refresh_from_db()
    assert (request.state, request.resolution_code) == (State.FAILED, "target_changed_reapproval_required")
    assert [tool for tool, _ in upstream_calls()] == ["redefine", "redefine"]  # never send_note


def test_a_gateway_killed_between_claim_and_complete_ends_outcome_unknown_and_the_retry_says_so(
    django_db_blocker, gateway_server, calls_file, token, gateway_rules, upstream_calls, people
):
    slow = {"to": "dana", "seconds": 5}
    call(gateway_server, token, "demo.slow_note", slow)
    request = the_request("demo.slow_note")
    approve(people, request)
    doomed = _start_gateway(django_db_blocker, calls_file)
    caller = threading.Thread(target=lambda: _ignore_errors(call, doomed, token, "demo.slow_note", slow), daemon=True)

    caller.start()
    try:
        deadline = time.monotonic() + 20
        while not upstream_calls() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert upstream_calls() == [("slow_note", slow)]  # claimed, and the upstream is running it
        doomed.process.kill()  # the gateway dies before it hears back
        doomed.process.wait()
    finally:
        doomed.stop()
    caller.join(30)
    request.refresh_from_db()
    assert request.state == State.EXECUTING
    ApprovalRequest.objects.filter(pk=request.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert services.fail_lost_execution(request.pk)  # the lease sweep

    retried = call(gateway_server, token, "demo.slow_note", slow)

    request.refresh_from_db()
    assert (request.state, request.resolution_code) == (State.FAILED, "outcome_unknown")
    assert retried.is_error and "outcome is unknown" in text_of(retried) and "not be run again" in text_of(retried)
    assert upstream_calls() == [("slow_note", slow)]  # still once


def test_a_retry_with_other_arguments_or_another_call_id_is_another_request(
    gateway_server, token, gateway_rules, upstream_calls
):
    call(gateway_server, token, "demo.send_note", NOTE)
    call(gateway_server, token, "demo.send_note", {**NOTE, "text": "another"})
    call(gateway_server, token, "demo.send_note", NOTE, meta={"controlplane/call_id": "second-note"})
    call(gateway_server, token, "demo.send_note", NOTE, meta={"controlplane/call_id": "second-note"})

    assert ApprovalRequest.objects.filter(action_type="demo.send_note").count() == 3
    assert upstream_calls() == []


def _ignore_errors(fn, *args) -> None:
    try:
        fn(*args)
    except BaseException:  # noqa: BLE001 - the server under it is killed on purpose
        pass


def test_two_identical_calls_at_once_are_one_request(gateway_server, second_gateway_server, token, gateway_rules):
    """The (agent, key) unique index, not a look-then-insert, makes racing retries one request."""
    answers: list = []
    callers = [
        threading.Thread(target=lambda s=server: answers.append(call(s, token, "demo.send_note", NOTE)))
        for server in (gateway_server, second_gateway_server)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)

    request = the_request()
    assert len(answers) == 2 and all(f"request {request.pk}" in text_of(answer) for answer in answers)


def test_a_client_that_drops_the_connection_mid_hold_and_reconnects_finds_its_request(
    gateway_server, token, gateway_rules, upstream_calls, people
):
    @sync_to_async(thread_sensitive=False)
    def submitted() -> bool:
        try:
            return ApprovalRequest.objects.filter(action_type="demo.send_note").exists()
        finally:
            connection.close()  # this thread's own connection

    async def dropped():
        async with gateway(gateway_server, token) as client:
            held_call = asyncio.ensure_future(client.call_tool("demo.send_note", NOTE))
            while not await submitted():  # held now: drop the connection
                await asyncio.sleep(0.02)
            held_call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await held_call

    run(dropped())
    request = the_request()
    approve(people, request)

    ran = call(gateway_server, token, "demo.send_note", NOTE)  # a new connection, the same call

    assert text_of(ran) == "note sent to dana"
    assert ApprovalRequest.objects.filter(action_type="demo.send_note").count() == 1
    assert upstream_calls() == [("send_note", NOTE)]


def test_a_held_call_wakes_on_the_decision_not_on_its_next_read(
    django_db_blocker, calls_file, token, gateway_rules, upstream_calls, people
):
    """The hold reads the request every 2 s; the decision's broadcast wakes it sooner."""
    patient = _start_gateway(django_db_blocker, calls_file, MCP_HOLD_SECONDS="10")
    try:
        decided_at: list[float] = []

        def decide() -> None:
            while not ApprovalRequest.objects.filter(action_type="demo.send_note").exists():
                time.sleep(0.02)
            time.sleep(0.5)  # held by now
            decided_at.append(time.monotonic())
            approve(people, the_request())
            connection.close()

        decider = threading.Thread(target=decide)
        decider.start()
        ran = call(patient, token, "demo.send_note", NOTE)
        answered = time.monotonic()
        decider.join(30)
    finally:
        patient.stop()

    assert text_of(ran) == "note sent to dana"
    assert answered - decided_at[0] < 1.0, answered - decided_at[0]
    assert upstream_calls() == [("send_note", NOTE)]
