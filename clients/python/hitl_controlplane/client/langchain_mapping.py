"""LangChain HITL's decisions from control-plane resumes: the pure mapping, no I/O.

`tool_calls_of` reads the gated calls of a `HumanInTheLoopMiddleware` interrupt (batched
`HITLRequest` or per-call `ToolApprovalRequest`); `decision_for` turns a verified resume
into the middleware's decision. `langchain_hitl` submits, waits and claims around them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._core import ApprovalRejected, Resume

__all__ = [
    "HITL_DECISIONS",
    "ToolCall",
    "allowed_from_schema",
    "call_key",
    "decision_for",
    "not_run",
    "tool_calls_of",
    "with_call_ids",
]

# The middleware's `DecisionType`; the control plane's `allowed_decisions` use the same words.
HITL_DECISIONS = ("approve", "edit", "reject", "respond")


@dataclass(frozen=True)
class ToolCall:
    """One gated tool call of an interrupt, as the control plane will see it."""

    name: str
    args: dict[str, Any]
    description: str
    allowed: tuple[str, ...]
    tool_call_id: str = ""


def call_key(thread_id: str, tool_call_id: str, name: str) -> str:
    """The idempotency key of a gated call that has its tool-call id: one request per call and
    thread, found again by the answering host and by the wrapped tool (`langchain_tools`)."""
    seed = "\n".join(("call", thread_id, tool_call_id, name))
    return "lc-hitl-" + hashlib.sha256(seed.encode()).hexdigest()[:48]


def with_call_ids(calls: Sequence[ToolCall], tool_calls: Sequence[Mapping[str, Any]] | None) -> list[ToolCall]:
    """`calls` with the ids of the model's `tool_calls` (a batched interrupt names none): each
    call takes the first unused tool call of the same name and arguments, in order."""
    unused = [dict(found) for found in tool_calls or () if found.get("id")]
    named = []
    for call in calls:
        match = next(
            (i for i, found in enumerate(unused) if found.get("name") == call.name and found.get("args") == call.args),
            None,
        )
        if not call.tool_call_id and match is not None:
            call = replace(call, tool_call_id=str(unused.pop(match)["id"]))
        named.append(call)
    return named


def allowed_from_schema(schema: Any) -> tuple[str, ...]:
    """The decision types a per-call interrupt's `response_schema` (a JSON Schema) accepts.

    Several decisions: a union discriminated by `type`, whose mapping names them. One
    decision: that decision's own object schema, its `type` pinned by a `const`.
    Anything unreadable allows all four; the middleware still checks the answer itself.
    """
    if not isinstance(schema, Mapping):
        return HITL_DECISIONS
    mapping = (schema.get("discriminator") or {}).get("mapping") or {}
    found = [name for name in mapping if name in HITL_DECISIONS]
    if not found:
        kind = (schema.get("properties") or {}).get("type") or {}
        found = [v for v in ([kind["const"]] if "const" in kind else kind.get("enum") or ()) if v in HITL_DECISIONS]
    return tuple(dict.fromkeys(found)) or HITL_DECISIONS


def tool_calls_of(value: Mapping[str, Any], *, allowed_decisions: Sequence[str] | None = None) -> list[ToolCall]:
    """The gated calls of an interrupt value, in request order.

    `value`: a batched `HITLRequest` or a per-call `ToolApprovalRequest`.
    `allowed_decisions`: for a per-call value, what its tool allows (the value itself
    does not say; `answer_interrupts` reads it from the interrupt's `response_schema`).
    """
    if value.get("type") == "tool_approval":
        return [
            ToolCall(
                name=value["name"],
                args=dict(value.get("args") or {}),
                description=value.get("description", ""),
                allowed=tuple(allowed_decisions or HITL_DECISIONS),
                tool_call_id=value.get("tool_call_id") or "",
            )
        ]
    if "action_requests" not in value:
        raise ValueError("Not a HumanInTheLoopMiddleware interrupt: no action_requests and not a tool_approval.")
    requests = list(value["action_requests"])
    configs = list(value.get("review_configs") or ())
    by_name = {config["action_name"]: config for config in configs}
    calls = []
    for index, request in enumerate(requests):
        # The middleware builds the two lists side by side; by name only if they disagree.
        config = (
            configs[index]
            if len(configs) == len(requests) and configs[index]["action_name"] == request["name"]
            else by_name.get(request["name"], {})
        )
        calls.append(
            ToolCall(
                name=request["name"],
                args=dict(request.get("args") or {}),
                description=request.get("description", ""),
                allowed=tuple(config.get("allowed_decisions") or HITL_DECISIONS),
            )
        )
    return calls


def decision_for(call: ToolCall, resume: Resume, *, approved_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The middleware's decision for `call`, from the control plane's resume.

    `approved_args`: the params the claim handed out, when the call was claimed (the
    exact approved params); otherwise the resume's.
    Raises ApprovalRejected when the host's config cannot take the decision.
    """
    action = resume.resume_data.get("action")
    if action == "approved":
        args = approved_args if approved_args is not None else resume.params
        if args != call.args:
            decision = {"type": "edit", "edited_action": {"name": call.name, "args": args}}
        else:
            decision = {"type": "approve"}
    elif action == "responded":
        decision = {"type": "respond", "message": resume.resume_data.get("message", "")}
    else:  # rejected, expired, cancelled, or re-validation refused to run it
        decision = {"type": "reject", **({"message": resume.feedback} if resume.feedback else {})}
    if decision["type"] not in call.allowed:
        raise ApprovalRejected(
            Resume(
                request_id=resume.request_id,
                state=resume.state,
                tool_result=resume.tool_result,
                raw=resume.raw,
                resume_data={
                    "action": "rejected",
                    "feedback": (
                        f"The reviewers' decision ({decision['type']}) is not one {call.name} allows "
                        f"({', '.join(call.allowed)}); stopping instead. {resume.feedback}"
                    ).strip(),
                },
            )
        )
    return decision


def not_run(resume: Resume, text: str) -> Resume:
    """A claim the server refused (re-validation, already handed out): answered as a rejection."""
    return Resume(
        request_id=resume.request_id,
        state=resume.state,
        tool_result=resume.tool_result,
        raw=resume.raw,
        resume_data={"action": "rejected", "feedback": text},
    )
