"""The OpenAI Agents SDK's tool approvals, decided by people on the control plane.

A run that reaches a `needs_approval` tool stops with `result.interruptions` (one
ToolApprovalItem per tool call; parallel calls give several). `decide_interruptions`
submits each as an action (action type = tool name, params = the parsed arguments,
tool_call_id = the call id, run_id = yours), waits for every decision, checks each
decision's signature (when the client has a key) and only then applies them to the
run state: `state.approve(item)`, or `state.reject(item, rejection_message=feedback)`
so the model reads the reviewer's words. The caller resumes with
`Runner.run(agent, state)`.

    result = await Runner.run(agent, "Pay invoice 42")
    while result.interruptions:
        state = result.to_state()
        await decide_interruptions_async(acp, state, result.interruptions, run_id="run-42")
        result = await Runner.run(agent, state)

Each submission's idempotency key is derived from (run id, call id), so a host that
crashed, or saved `state.to_string()` and resumed in another process, calls this
again and finds the same requests instead of opening new ones.

`state.approve(item)` only tells the SDK to run the tool; it runs it itself, as often as
a state is resumed. Wrap each gated tool with `controlled_tool(acp, tool, run_id=...)`:
its body then runs through the execution handshake (hitl_controlplane.handshake),
keyed by the call id: it finds the call's request, verifies the signed decision, claims
with a fresh nonce, verifies the signed grant and runs with exactly the granted
arguments, then completes. A state restored twice (or resumed in two processes) runs
the tool once; the other gets "Not run: already executed (...)" as the tool's output.

    transfer = controlled_tool(acp, transfer_funds, run_id="run-42")
    agent = Agent(name="payments", tools=[transfer], ...)

The SDK cannot run a tool with arguments other than the model's, so an approval
whose params a reviewer edited is applied as a rejection telling the model to call
again with exactly the approved arguments (which are then reviewed as a new call).

Nothing here imports the SDK (its import name, `agents`, is also a Django app's in
the control plane's own tree): items and the state are used through their public
attributes and methods.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..decisions import SubmittedCall
from . import handshake
from ._core import ControlPlaneError, Resume, action_call, submitted_id
from .asynchronous import AsyncControlPlane
from .synchronous import ControlPlane

__all__ = [
    "controlled_tool",
    "decide_interruptions",
    "decide_interruptions_async",
    "interruption_action",
    "rejection_message",
]

NO_REQUEST = "Not run: the control plane holds no approved request for this call (call id {call_id})."

EDITED_MESSAGE = (
    "A reviewer approved this call only with changed arguments. Call the tool again with exactly these "
    "arguments: {params}"
)


def interruption_action(
    item: Any,
    *,
    run_id: str,
    target: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The action a ToolApprovalItem becomes: `submit_action` keyword arguments, idempotency key included."""
    name = item.tool_name or item.name
    call_id = item.call_id
    if not name or not call_id:
        raise ValueError(f"the approval item names no tool or call id: {item!r}")
    return {
        "action_type": name,
        "target": target(item) if callable(target) else (target or {}),
        "params": parsed_arguments(item.arguments),
        "tool_call_id": call_id,
        "run_id": run_id,
        "idempotency_key": call_key(run_id, call_id),
    }


def call_key(run_id: str, call_id: str) -> str:
    """The idempotency key of one tool call's request: the same in every process that sees the call."""
    return f"oai-{run_id}-{call_id}"[:200]


def parsed_arguments(arguments: str | None) -> dict[str, Any]:
    """The tool call's arguments as params: a JSON object as is, anything else under `arguments`."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def rejection_message(resume: Resume, arguments: dict[str, Any]) -> str | None:
    """What the model reads instead of the tool's output; None when the call may run as asked.

    The reviewer's feedback for a rejection (None without feedback: the SDK's own
    default text); for an approval of edited arguments, the instruction to call again.
    """
    if not resume.approved:
        return resume.feedback or None
    if resume.params != arguments:
        return EDITED_MESSAGE.format(params=json.dumps(resume.params, sort_keys=True, ensure_ascii=False))
    return None


def _bound(action: dict[str, Any]) -> SubmittedCall:
    """The call an interruption's submission makes, which its signed decision must name."""
    return action_call(
        action["action_type"],
        action["params"],
        idempotency_key=action["idempotency_key"],
        tool_call_id=action["tool_call_id"],
    )


def _apply(state: Any, items: Sequence[Any], actions: Sequence[dict[str, Any]], resumes: Sequence[Resume]) -> None:
    for item, action, resume in zip(items, actions, resumes):
        message = rejection_message(resume, action["params"])
        if resume.approved and message is None:
            resume.check_params(action["params"])  # exactly what the SDK will run was signed
            state.approve(item)
        else:
            state.reject(item, rejection_message=message)


def decide_interruptions(
    cp: ControlPlane,
    state: Any,
    interruptions: Iterable[Any],
    *,
    run_id: str,
    target: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None,
    timeout: float | None = None,
) -> list[Resume]:
    """Submit every interruption, wait for all decisions, then approve or reject each on `state`.

    Returns the decisions in the interruptions' order. Raises DecisionRefused (and
    applies nothing) when any decision's signature does not bind it to its call,
    ApprovalTimeout when `timeout` passes first.
    """
    items = list(interruptions)
    actions = [interruption_action(item, run_id=run_id, target=target) for item in items]
    submitted = [cp.submit_action(**action) for action in actions]
    # Every request is open before the first wait: reviewers see the whole batch at once.
    resumes = [
        cp.wait(submitted_id(found), timeout=timeout, call=_bound(action)) for found, action in zip(submitted, actions)
    ]
    _apply(state, items, actions, resumes)
    return resumes


async def decide_interruptions_async(
    acp: AsyncControlPlane,
    state: Any,
    interruptions: Iterable[Any],
    *,
    run_id: str,
    target: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None,
    timeout: float | None = None,
) -> list[Resume]:
    """`decide_interruptions` for asyncio hosts (`Runner.run`): the waits run concurrently."""
    items = list(interruptions)
    actions = [interruption_action(item, run_id=run_id, target=target) for item in items]
    submitted = await asyncio.gather(*(acp.submit_action(**action) for action in actions))
    resumes = await asyncio.gather(
        *(
            acp.wait(submitted_id(found), timeout=timeout, call=_bound(action))
            for found, action in zip(submitted, actions)
        )
    )
    _apply(state, items, actions, list(resumes))
    return list(resumes)


def controlled_tool(acp: AsyncControlPlane, tool: Any, *, run_id: str, timeout: float | None = 60.0) -> Any:
    """A copy of the SDK FunctionTool `tool` whose body runs only through the execution handshake.

    On each invocation (`on_invoke_tool(ctx, arguments)`) it finds the request submitted
    for `ctx.tool_call_id` in `run_id` (as `decide_interruptions_async` submits it), waits
    for its verified decision, claims and verifies the grant, and only then runs the
    original tool with the granted arguments (as JSON) and completes. The tool's output is
    its result, "Not run: already executed (...)" for a call claimed before, or "Not run:
    ..." when there is no approval or the server refused the claim. DecisionRefused (a
    forged, replayed or altered decision or grant) propagates: nothing ran (the SDK's
    `Runner.run` raises it as a `UserError` whose `__cause__` is the DecisionRefused).
    """
    original = tool.on_invoke_tool

    async def invoke(ctx: Any, arguments: str) -> Any:
        call_id = ctx.tool_call_id
        params = parsed_arguments(arguments)
        key = call_key(run_id, call_id)
        call = action_call(tool.name, params, idempotency_key=key, tool_call_id=call_id)
        found = await acp.find(idempotency_key=key)
        if not found:
            return NO_REQUEST.format(call_id=call_id)
        resume = await acp.wait(submitted_id(found[0]), timeout=timeout, call=call)

        async def body(**granted: Any) -> Any:
            return await original(ctx, json.dumps(granted, ensure_ascii=False))

        try:
            return await handshake.arun_approved(acp, resume, call, body)
        except ControlPlaneError as refusal:  # rejected, or the server refused the claim (re-validation)
            return f"Not run: {refusal.message}"

    wrapped = copy.copy(tool)
    wrapped.on_invoke_tool = invoke
    return wrapped
