"""LangChain tools whose body runs only through the execution handshake.

`HumanInTheLoopMiddleware` runs an approved tool itself, as often as its step is
resumed. Wrap each gated tool, and answer the interrupts without claiming (the tool
claims):

    from hitl_controlplane.client.langchain_tools import controlled_langchain_tool

    tools = [controlled_langchain_tool(cp, post_memo, thread_id="t-1")]
    agent = create_agent(model, tools=tools, middleware=[HumanInTheLoopMiddleware(...)], checkpointer=...)
    result = agent.invoke({"messages": [...]}, config)
    while result.get("__interrupt__"):
        resume = answer_interrupts(cp, result["__interrupt__"], thread_id="t-1", claim=False,
                                   tool_calls=result["messages"][-1].tool_calls)
        result = agent.invoke(Command(resume=resume), config)

The wrapper is invoked with the tool call (the agent's ToolNode passes it): it finds
the request `answer_interrupts` submitted for that call id in this thread (the same
idempotency key, `langchain_mapping.call_key`), verifies its signed decision against
the call, claims with a fresh nonce, verifies the grant, runs the original tool with
exactly the granted arguments and completes with its output. In the batched mode
the interrupt names no tool-call ids, so the host passes the model's `tool_calls`
(above) and each request carries its call's id; the per-call mode has them already.

A reviewer's edit reaches the tool (the middleware hands it the edited arguments with
the call's id): the decision is then checked to name this call and to approve exactly
these arguments, and the tool runs with them. A call claimed before (a restored
checkpoint, a second process) reads "Not run: already executed (...)"; a call with no
approved request, or one the server refused to hand out, reads "Not run: ...".
DecisionRefused propagates (the ToolNode re-raises it): nothing ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..decisions import SubmittedCall
from . import handshake
from ._core import ControlPlaneError, Resume, action_call, submitted_id
from .asynchronous import AsyncControlPlane
from .langchain_mapping import call_key
from .synchronous import ControlPlane

__all__ = ["NO_REQUEST", "controlled_langchain_tool"]

NO_REQUEST = "Not run: the control plane holds no request for this call (tool call id {call_id})."


def bound_call(resume: Resume, name: str, args: dict[str, Any], *, key: str, call_id: str) -> SubmittedCall:
    """The call the decision must name. The model's call as the tool received it; for an edit the
    tool received the reviewer's arguments, so it stands for the call only if those are exactly
    what the decision approved (verified with the rest of the decision in the handshake)."""
    call = action_call(name, args, idempotency_key=key, tool_call_id=call_id)
    signed = (resume.raw.get("decision_signature") or {}).get("signed") or {}
    submitted = signed.get("submitted_sha256")
    if resume.approved and resume.params == args and isinstance(submitted, str) and submitted != call.submitted_sha256:
        return replace(call, submitted_sha256=submitted)
    return call


def _the_call(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(call id, arguments) when the tool is invoked with a tool call, else None."""
    if isinstance(value, Mapping) and value.get("type") == "tool_call" and value.get("id"):
        return str(value["id"]), dict(value.get("args") or {})
    return None


def _message(text: Any, *, name: str, call_id: str) -> Any:
    from langchain_core.messages import ToolMessage

    if isinstance(text, ToolMessage):
        return text
    content = text if isinstance(text, str | list) else str(text)
    return ToolMessage(content=content, name=name, tool_call_id=call_id)


def _run(
    cp: ControlPlane, tool: Any, call_id: str, args: dict[str, Any], config: Any, thread_id: str, timeout: Any
) -> Any:
    key = call_key(thread_id, call_id, tool.name)
    found = cp.find(idempotency_key=key)
    if not found:
        return NO_REQUEST.format(call_id=call_id)
    request_id = submitted_id(found[0])
    resume = cp.wait(request_id, timeout=timeout)
    if not resume.approved:  # a host that ran the tool without the reviewers' approval
        return f"Not run: {resume.tool_result or resume.feedback or 'not approved'}"
    call = bound_call(resume, tool.name, args, key=key, call_id=call_id)
    try:
        return handshake.run_approved(cp, resume, call, lambda **granted: tool.invoke(granted, config))
    except ControlPlaneError as refusal:  # the server refused the claim (re-validation)
        return f"Not run: {refusal.message}"


async def _arun(
    acp: AsyncControlPlane, tool: Any, call_id: str, args: dict[str, Any], config: Any, thread_id: str, timeout: Any
) -> Any:
    key = call_key(thread_id, call_id, tool.name)
    found = await acp.find(idempotency_key=key)
    if not found:
        return NO_REQUEST.format(call_id=call_id)
    request_id = submitted_id(found[0])
    resume = await acp.wait(request_id, timeout=timeout)
    if not resume.approved:
        return f"Not run: {resume.tool_result or resume.feedback or 'not approved'}"
    call = bound_call(resume, tool.name, args, key=key, call_id=call_id)

    async def body(**granted: Any) -> Any:
        return await tool.ainvoke(granted, config)

    try:
        return await handshake.arun_approved(acp, resume, call, body)
    except ControlPlaneError as refusal:
        return f"Not run: {refusal.message}"


def controlled_langchain_tool(
    cp: ControlPlane | AsyncControlPlane, tool: Any, *, thread_id: str, timeout: float | None = 60.0
) -> Any:
    """A LangChain tool with `tool`'s name, description and schema whose body runs only through
    the handshake (module docstring). `thread_id`: the one `answer_interrupts` is given.
    With AsyncControlPlane the agent must run async (`ainvoke`); with ControlPlane either way."""
    from langchain_core.tools import BaseTool

    class ControlledTool(BaseTool):
        def _run(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError(f"{tool.name} runs only when invoked with its tool call (it claims by the call id)")

        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            found = _the_call(input)
            if found is None or isinstance(cp, AsyncControlPlane):
                return self._run()
            call_id, args = found
            return _message(_run(cp, tool, call_id, args, config, thread_id, timeout), name=tool.name, call_id=call_id)

        async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            if not isinstance(cp, AsyncControlPlane):
                return await asyncio.to_thread(self.invoke, input, config)
            found = _the_call(input)
            if found is None:
                return self._run()
            call_id, args = found
            text = await _arun(cp, tool, call_id, args, config, thread_id, timeout)
            return _message(text, name=tool.name, call_id=call_id)

    return ControlledTool(
        name=tool.name, description=tool.description, args_schema=tool.args_schema, return_direct=tool.return_direct
    )
