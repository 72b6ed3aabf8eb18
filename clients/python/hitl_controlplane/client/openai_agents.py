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

The SDK cannot run a tool with arguments other than the model's, so an approval
whose params a reviewer edited is applied as a rejection telling the model to call
again with exactly the approved arguments (which are then reviewed as a new call).

Nothing here imports the SDK (its import name, `agents`, is also a Django app's in
the control plane's own tree): items and the state are used through their public
attributes and methods.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..decisions import SubmittedCall
from ._core import Resume, action_call, submitted_id
from .asynchronous import AsyncControlPlane
from .synchronous import ControlPlane

__all__ = ["decide_interruptions", "decide_interruptions_async", "interruption_action", "rejection_message"]

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
        "idempotency_key": f"oai-{run_id}-{call_id}"[:200],
    }


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
