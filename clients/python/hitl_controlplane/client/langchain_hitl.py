"""LangChain's `HumanInTheLoopMiddleware`, answered by people through the control plane.

The middleware pauses an agent with a LangGraph interrupt and resumes it with the
reviewers' decisions. This module turns the interrupt into control-plane actions
(one per gated tool call, sharing the run and one batch, each with its own
tool-call id and the decisions its review config allows), waits until every one is
decided, and builds the resume value the middleware expects:

    from langgraph.types import Command
    from hitl_controlplane.client.langchain_hitl import answer_interrupts

    result = agent.invoke({"messages": [...]}, config)
    while result.get("__interrupt__"):
        resume = answer_interrupts(cp, result["__interrupt__"], thread_id="t-1", run_id="run-1")
        result = agent.invoke(Command(resume=resume), config)

Both interrupt modes of the middleware are understood: `batched` (one `HITLRequest`,
`{action_requests, review_configs}`, answered `{"decisions": [...]}` in request
order) and `per_call` (one `ToolApprovalRequest` per gated call, answered with one
decision; its allowed decisions come from the interrupt's `response_schema`).

Mapping: approved -> `{"type": "approve"}`, or `{"type": "edit", "edited_action":
{"name": <the tool's own name>, "args": <the approved params>}}` when a reviewer
changed them (an edit never changes the tool); rejected, expired or cancelled ->
`{"type": "reject", "message": <feedback>}`; a reviewer's reply in place of the tool
-> `{"type": "respond", "message": <reply>}`. A decision the host's config cannot
take (say a rejection where the tool allows only approve) raises `ApprovalRejected`,
so the run stops instead of the middleware raising mid-step.

With `claim` (the default), an approved call is claimed before it is handed to the
middleware: the server re-validates it right before it runs and hands it out at most
once, so a host that restarts and answers the same interrupt again cannot run it
twice (the second claim is refused and the call is answered as a rejection: "Not run:
already executed ..."). The claim goes through the execution handshake
(hitl_controlplane.handshake): its signed grant must bind the signed decision's
request, revision and params and this claim's nonce, so params altered in the claim
answer raise DecisionRefused instead of reaching the tool. The claim is then completed
as handed off: the middleware, not this client, runs the tool. To have the tool body
itself claim on entry and complete on exit (so the middleware never runs a tool outside
the handshake, and its result's digest is audited), wrap each gated tool with
`langchain_tools.controlled_langchain_tool` and answer with `claim=False` and the model's
`tool_calls`.

Imports nothing from LangChain: the interrupt values are plain dicts, and
`Interrupt` objects are read by their `id`, `value` and `response_schema`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..decisions import SubmittedCall
from . import handshake
from ._core import ControlPlaneError, action_call, submitted_id
from .asynchronous import AsyncControlPlane
from .langchain_mapping import (
    HITL_DECISIONS,
    ToolCall,
    allowed_from_schema,
    call_key,
    decision_for,
    not_run,
    tool_calls_of,
    with_call_ids,
)
from .synchronous import ControlPlane

__all__ = [
    "HITL_DECISIONS",
    "ToolCall",
    "aanswer_interrupt",
    "aanswer_interrupts",
    "allowed_from_schema",
    "answer_interrupt",
    "answer_interrupts",
    "decision_for",
    "tool_calls_of",
]

# What the claim's outcome says: the tool runs in the host, after this client returns.
HANDED_OFF = {"handed_to": "langchain HumanInTheLoopMiddleware"}

Target = Callable[[str, dict[str, Any]], dict[str, Any]]


def _idempotency_key(thread_id: str, batch_id: str, index: int, call: ToolCall) -> str:
    # The same interrupt answered again (a host restart) replays its requests instead of
    # asking twice: the tool-call id names the call; without one, the interrupt id (stable
    # for its step) and the call's place in it do.
    if call.tool_call_id:
        return call_key(thread_id, call.tool_call_id, call.name)
    seed = "\n".join((thread_id, batch_id, str(index), call.tool_call_id, call.name))
    return "lc-hitl-" + hashlib.sha256(seed.encode()).hexdigest()[:48]


def _submission(
    call: ToolCall, index: int, *, batch_id: str, run_id: str, thread_id: str, target: Target | None
) -> dict[str, Any]:
    return {
        "action_type": call.name,
        "target": target(call.name, call.args) if target else {},
        "params": call.args,
        "declared": {"description": call.description} if call.description else {},
        "allowed_decisions": list(call.allowed),
        "batch_id": batch_id,
        "run_id": run_id,
        "thread_id": thread_id,
        # Batched requests carry no tool-call id: the call's place in the step names it.
        "tool_call_id": call.tool_call_id or f"{batch_id[:180]}#{index}",
        "idempotency_key": _idempotency_key(thread_id, batch_id, index, call),
    }


def _bound(body: dict[str, Any]) -> SubmittedCall:
    """The call a submission body makes, which its signed decision must name."""
    return action_call(
        body["action_type"], body["params"], idempotency_key=body["idempotency_key"], tool_call_id=body["tool_call_id"]
    )


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.001)


# --- Blocking ------------------------------------------------------------------------------------


def _settle(
    cp: ControlPlane, call: ToolCall, request_id: str, submitted: SubmittedCall, *, claim: bool, deadline: float | None
) -> dict[str, Any]:
    resume = cp.wait(request_id, timeout=_remaining(deadline), call=submitted)
    if not (claim and resume.approved):
        return decision_for(call, resume)
    # The handshake up to the run: the grant must bind the signed decision's params, so
    # the middleware runs exactly what was approved (not what a proxy put in the claim).
    try:
        claimed = handshake.claim_approved(cp, resume, submitted)
    except ControlPlaneError as refusal:
        return decision_for(call, not_run(resume, f"Not run: {refusal.message}"))
    if isinstance(claimed, str):  # claimed before: a restarted host answering the same interrupt
        return decision_for(call, not_run(resume, claimed))
    cp.complete(request_id, claimed.token, succeeded=True, result=HANDED_OFF)
    return decision_for(call, resume, approved_args=claimed.params)


def _answer_calls(
    cp: ControlPlane,
    calls: list[ToolCall],
    *,
    batch_id: str,
    run_id: str,
    thread_id: str,
    target: Target | None,
    timeout: float | None,
    claim: bool,
) -> list[dict[str, Any]]:
    deadline = None if timeout is None else time.monotonic() + timeout
    # Every call is submitted before any wait, so reviewers see the whole step at once.
    submitted = []
    for index, call in enumerate(calls):
        body = _submission(call, index, batch_id=batch_id, run_id=run_id, thread_id=thread_id, target=target)
        bound = _bound(body)
        key = body.pop("idempotency_key")
        answer = cp.submit_action(
            body.pop("action_type"), body.pop("target"), body.pop("params"), idempotency_key=key, **body
        )
        submitted.append((submitted_id(answer), bound))
    return [
        _settle(cp, call, request_id, bound, claim=claim, deadline=deadline)
        for call, (request_id, bound) in zip(calls, submitted)
    ]


def answer_interrupt(
    cp: ControlPlane,
    value: Mapping[str, Any],
    *,
    batch_id: str | None = None,
    run_id: str = "",
    thread_id: str = "",
    allowed_decisions: Sequence[str] | None = None,
    target: Target | None = None,
    timeout: float | None = None,
    claim: bool = True,
) -> dict[str, Any]:
    """The resume value for one interrupt value: `{"decisions": [...]}` for a batched
    `HITLRequest`, one decision for a per-call `ToolApprovalRequest`.

    `batch_id`: the interrupt's id, so answering it again replays instead of asking
    again (a fresh one when omitted). `target(name, args)`: the target to snapshot for
    each call. `allowed_decisions`: a per-call value's (see `answer_interrupts`).
    """
    calls = tool_calls_of(value, allowed_decisions=allowed_decisions)
    decisions = _answer_calls(
        cp,
        calls,
        batch_id=batch_id or f"lc-{uuid.uuid4()}",
        run_id=run_id,
        thread_id=thread_id,
        target=target,
        timeout=timeout,
        claim=claim,
    )
    return decisions[0] if value.get("type") == "tool_approval" else {"decisions": decisions}


def answer_interrupts(
    cp: ControlPlane,
    interrupts: Sequence[Any],
    *,
    run_id: str = "",
    thread_id: str = "",
    target: Target | None = None,
    timeout: float | None = None,
    claim: bool = True,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """`{interrupt.id: resume value}` for the middleware's pending interrupts (pass it to
    `Command(resume=...)`): one batched interrupt, or the per-call interrupts of parallel
    tool calls, all submitted as one batch and answered once every call is decided.

    `claim=False` when the tools are wrapped with `langchain_tools.controlled_langchain_tool`
    (they claim themselves); `tool_calls`: the model's (the last AI message's), so batched
    requests carry their calls' ids, which the wrapped tools find them by.
    """
    pending = [i for i in interrupts if _is_hitl(i.value)]
    if not pending:
        return {}
    batch_id = pending[0].id
    calls: list[ToolCall] = []
    spans = []
    for interrupt in pending:
        allowed = allowed_from_schema(getattr(interrupt, "response_schema", None))
        found = tool_calls_of(interrupt.value, allowed_decisions=allowed)
        spans.append((interrupt, len(calls), len(calls) + len(found)))
        calls += found
    calls = with_call_ids(calls, tool_calls)
    decisions = _answer_calls(
        cp, calls, batch_id=batch_id, run_id=run_id, thread_id=thread_id, target=target, timeout=timeout, claim=claim
    )
    return {interrupt.id: _resume_value(interrupt.value, decisions[start:end]) for interrupt, start, end in spans}


def _is_hitl(value: Any) -> bool:
    return isinstance(value, Mapping) and (value.get("type") == "tool_approval" or "action_requests" in value)


def _resume_value(value: Mapping[str, Any], decisions: list[dict[str, Any]]) -> dict[str, Any]:
    return decisions[0] if value.get("type") == "tool_approval" else {"decisions": decisions}


# --- asyncio -------------------------------------------------------------------------------------


async def _asettle(
    cp: AsyncControlPlane,
    call: ToolCall,
    request_id: str,
    submitted: SubmittedCall,
    *,
    claim: bool,
    deadline: float | None,
) -> dict[str, Any]:
    resume = await cp.wait(request_id, timeout=_remaining(deadline), call=submitted)
    if not (claim and resume.approved):
        return decision_for(call, resume)
    # The handshake up to the run: the grant must bind the signed decision's params, so
    # the middleware runs exactly what was approved (not what a proxy put in the claim).
    try:
        claimed = await handshake.aclaim_approved(cp, resume, submitted)
    except ControlPlaneError as refusal:
        return decision_for(call, not_run(resume, f"Not run: {refusal.message}"))
    if isinstance(claimed, str):  # claimed before: a restarted host answering the same interrupt
        return decision_for(call, not_run(resume, claimed))
    await cp.complete(request_id, claimed.token, succeeded=True, result=HANDED_OFF)
    return decision_for(call, resume, approved_args=claimed.params)


async def _aanswer_calls(
    cp: AsyncControlPlane,
    calls: list[ToolCall],
    *,
    batch_id: str,
    run_id: str,
    thread_id: str,
    target: Target | None,
    timeout: float | None,
    claim: bool,
) -> list[dict[str, Any]]:
    deadline = None if timeout is None else time.monotonic() + timeout
    submitted = []
    for index, call in enumerate(calls):
        body = _submission(call, index, batch_id=batch_id, run_id=run_id, thread_id=thread_id, target=target)
        bound = _bound(body)
        key = body.pop("idempotency_key")
        created = await cp.submit_action(
            body.pop("action_type"), body.pop("target"), body.pop("params"), idempotency_key=key, **body
        )
        submitted.append((submitted_id(created), bound))
    return list(
        await asyncio.gather(
            *(
                _asettle(cp, call, request_id, bound, claim=claim, deadline=deadline)
                for call, (request_id, bound) in zip(calls, submitted)
            )
        )
    )


async def aanswer_interrupt(
    cp: AsyncControlPlane,
    value: Mapping[str, Any],
    *,
    batch_id: str | None = None,
    run_id: str = "",
    thread_id: str = "",
    allowed_decisions: Sequence[str] | None = None,
    target: Target | None = None,
    timeout: float | None = None,
    claim: bool = True,
) -> dict[str, Any]:
    """`answer_interrupt` for AsyncControlPlane (the calls are waited on together)."""
    calls = tool_calls_of(value, allowed_decisions=allowed_decisions)
    decisions = await _aanswer_calls(
        cp,
        calls,
        batch_id=batch_id or f"lc-{uuid.uuid4()}",
        run_id=run_id,
        thread_id=thread_id,
        target=target,
        timeout=timeout,
        claim=claim,
    )
    return _resume_value(value, decisions)


async def aanswer_interrupts(
    cp: AsyncControlPlane,
    interrupts: Sequence[Any],
    *,
    run_id: str = "",
    thread_id: str = "",
    target: Target | None = None,
    timeout: float | None = None,
    claim: bool = True,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """`answer_interrupts` for AsyncControlPlane."""
    pending = [i for i in interrupts if _is_hitl(i.value)]
    if not pending:
        return {}
    calls: list[ToolCall] = []
    spans = []
    for interrupt in pending:
        found = tool_calls_of(
            interrupt.value, allowed_decisions=allowed_from_schema(getattr(interrupt, "response_schema", None))
        )
        spans.append((interrupt, len(calls), len(calls) + len(found)))
        calls += found
    calls = with_call_ids(calls, tool_calls)
    decisions = await _aanswer_calls(
        cp,
        calls,
        batch_id=pending[0].id,
        run_id=run_id,
        thread_id=thread_id,
        target=target,
        timeout=timeout,
        claim=claim,
    )
    return {interrupt.id: _resume_value(interrupt.value, decisions[start:end]) for interrupt, start, end in spans}
