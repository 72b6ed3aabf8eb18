"""A LangGraph node's tool call, paused for people and run only through the execution handshake.

Inside a node (the graph compiled with a checkpointer), for one tool call of the model's
last message:

    from hitl_controlplane.client.langgraph_tools import approved_tool_call, answer_approvals

    def transfer(state):
        call = state["messages"][-1].tool_calls[0]
        text = approved_tool_call(cp, call, transfer_funds, thread_id="t-1", run_id="run-1")
        return {"messages": [ToolMessage(str(text), tool_call_id=call["id"])]}

    state = graph.invoke({"messages": [...]}, config)
    while state.get("__interrupt__"):
        state = graph.invoke(Command(resume=answer_approvals(cp, state["__interrupt__"])), config)

`approved_tool_call` submits the call (idempotency key from the thread and the tool-call
id, so the node re-running on resume finds the same request), pauses the graph with
`interrupt(...)` until the host resumes it, then reads the decision from the server
itself, verified against the call it submitted: the resume value is only a wake-up,
never trusted. An approval runs `fn` through the handshake (hitl_controlplane.handshake:
claim with a fresh nonce, verified grant, exactly the granted params, complete), keyed
by the call, so a graph resumed twice from the same checkpoint (or in two processes)
runs it once; the other run reads "Not run: already executed (...)". A rejection
returns the text the model reads (the reviewer's feedback). An approval whose params a
reviewer edited runs with the edited params: the node, not the framework, calls the tool.
DecisionRefused (a forged, replayed or altered decision or grant) propagates: nothing ran.

One gated call per node run: LangGraph runs a node again from the top after each
resume, so a second `interrupt` in the same node would re-run the first call, which
then reads "already executed" instead of its result. Fan several calls out with `Send`
(one task per call), each task calling `approved_tool_call` once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from . import handshake
from ._core import ControlPlaneError, Resume, action_call, submitted_id
from .asynchronous import AsyncControlPlane
from .synchronous import ControlPlane

__all__ = ["INTERRUPT_TYPE", "aanswer_approvals", "aapproved_tool_call", "answer_approvals", "approved_tool_call"]

# The interrupt value's `type`: what `answer_approvals` answers (other interrupts are left alone).
INTERRUPT_TYPE = "controlplane_approval"


def call_key(thread_id: str, tool_call_id: str, name: str) -> str:
    """The idempotency key of one tool call's request: the same every time the node runs."""
    seed = "\n".join((thread_id, tool_call_id, name))
    return "lg-" + hashlib.sha256(seed.encode()).hexdigest()[:48]


def _parts(tool_call: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    name, call_id = tool_call.get("name"), tool_call.get("id")
    if not name or not call_id:
        raise ValueError(f"the tool call names no tool or id: {tool_call!r}")
    return str(name), dict(tool_call.get("args") or {}), str(call_id)


def _submission(
    name: str, args: dict[str, Any], call_id: str, *, thread_id: str, run_id: str, target: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "action_type": name,
        "target": target or {},
        "params": args,
        "idempotency_key": call_key(thread_id, call_id, name),
        "tool_call_id": call_id,
        "thread_id": thread_id,
        "run_id": run_id,
    }


def _pause(request_id: str, body: Mapping[str, Any]) -> None:
    from langgraph.types import interrupt  # only a graph's node calls this

    interrupt(
        {
            "type": INTERRUPT_TYPE,
            "request_id": request_id,
            "action_type": body["action_type"],
            "params": body["params"],
            "tool_call_id": body["tool_call_id"],
        }
    )


def _rejected_text(resume: Resume) -> str:
    """What the model reads for anything but an approval: the signed tool result (the reviewer's words)."""
    return resume.tool_result or resume.feedback or "Not run: the reviewers did not approve this call."


def approved_tool_call(
    cp: ControlPlane,
    tool_call: Mapping[str, Any],
    fn: Callable[..., Any],
    *,
    thread_id: str,
    run_id: str = "",
    target: dict[str, Any] | None = None,
    timeout: float | None = 60.0,
) -> Any:
    """In a node: submit `tool_call`, pause, and run `fn(**approved params)` once through the handshake.

    Returns `fn`'s result, "Not run: already executed (...)" for a call claimed before,
    the text the model reads for a rejection, or "Not run: ..." for a claim the server
    refused (re-validation). Raises DecisionRefused when anything does not verify.
    """
    name, args, call_id = _parts(tool_call)
    body = _submission(name, args, call_id, thread_id=thread_id, run_id=run_id, target=target)
    call = action_call(name, args, idempotency_key=body["idempotency_key"], tool_call_id=call_id)
    request_id = submitted_id(cp.submit_action(**body))
    _pause(request_id, body)
    resume = cp.wait(request_id, timeout=timeout, call=call)
    if not resume.approved:
        return _rejected_text(resume)
    try:
        return handshake.run_approved(cp, resume, call, fn)
    except ControlPlaneError as refusal:  # the server refused the claim (re-validation)
        return f"Not run: {refusal.message}"


async def aapproved_tool_call(
    acp: AsyncControlPlane,
    tool_call: Mapping[str, Any],
    fn: Callable[..., Any | Awaitable[Any]],
    *,
    thread_id: str,
    run_id: str = "",
    target: dict[str, Any] | None = None,
    timeout: float | None = 60.0,
) -> Any:
    """`approved_tool_call` in an async node, with AsyncControlPlane (`fn` may be a coroutine function)."""
    name, args, call_id = _parts(tool_call)
    body = _submission(name, args, call_id, thread_id=thread_id, run_id=run_id, target=target)
    call = action_call(name, args, idempotency_key=body["idempotency_key"], tool_call_id=call_id)
    request_id = submitted_id(await acp.submit_action(**body))
    _pause(request_id, body)
    resume = await acp.wait(request_id, timeout=timeout, call=call)
    if not resume.approved:
        return _rejected_text(resume)
    try:
        return await handshake.arun_approved(acp, resume, call, fn)
    except ControlPlaneError as refusal:
        return f"Not run: {refusal.message}"


def _pending(interrupts: Sequence[Any]) -> list[Any]:
    return [i for i in interrupts if isinstance(i.value, Mapping) and i.value.get("type") == INTERRUPT_TYPE]


def answer_approvals(cp: ControlPlane, interrupts: Sequence[Any], *, timeout: float | None = None) -> dict[str, Any]:
    """`{interrupt.id: resume value}` once every pending approval is decided (for `Command(resume=...)`).

    The value only wakes the node, which reads and verifies the decision itself.
    """
    return {
        i.id: {"request_id": cp.wait(i.value["request_id"], timeout=timeout).request_id} for i in _pending(interrupts)
    }


async def aanswer_approvals(
    acp: AsyncControlPlane, interrupts: Sequence[Any], *, timeout: float | None = None
) -> dict[str, Any]:
    """`answer_approvals` for AsyncControlPlane."""
    answers = {}
    for i in _pending(interrupts):
        answers[i.id] = {"request_id": (await acp.wait(i.value["request_id"], timeout=timeout)).request_id}
    return answers
