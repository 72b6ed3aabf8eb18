"""What the gateway asks of the control plane, synchronously: the same rules, state
machine and handshake every agent meets, called as the agent whose token came in.

- a tool is an action type `<server>.<tool>`; its arguments are the params;
- its definition (name, title, description, schemas, annotations) is digested into
  the request's target, so what reviewers approve names the tool as listed;
- its annotations are stored as `declared.*`: the four MCP hints, each with the
  spec's default where the upstream left it out. Hints are claims by the upstream,
  and they never lower risk: when the call classifies less strictly with them than
  with the spec's defaults (the cautious reading), the defaults are stored instead;
- a listing hides the tools a rule prohibits whatever their arguments (the
  classification of a call with no arguments is `prohibited` and read nothing
  unknown); a tool a rule prohibits only for some arguments stays listed and
  those calls are refused.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from django.conf import settings

from agents.models import Agent
from agents.submissions import submit_from_agent
from approvals import services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.policy import current_policy
from approvals.policy.rules import ActionTypeError, Classification, ClassificationInput, is_stricter
from approvals.snapshots import stable_hash
from approvals.states import Kind, RiskLevel
from audit.chain import Actor
from controlplane.http.fields import json_size
from controlplane.http.inputs import first_problem
from hitl_controlplane.grants import new_nonce

from . import held

__all__ = [
    "HINT_DEFAULTS",
    "ArgumentsRefused",
    "action_type_for",
    "claim",
    "complete",
    "declared_hints",
    "definition_sha256",
    "find_or_submit",
    "listed_tools",
    "reread",
    "submit_call",
    "target_for",
]

# The MCP spec's defaults: the cautious reading of a tool that says nothing.
HINT_DEFAULTS: dict[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


class ArgumentsRefused(ValueError):
    """Arguments the server would refuse from any agent (too large, unstorable)."""


def action_type_for(server: str, tool: str) -> str:
    return f"{server}.{tool}"


def definition_sha256(tool: types.Tool) -> str:
    """sha256 of the tool's definition as the upstream lists it (everything but `_meta`)."""
    return stable_hash(tool.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"}))


def target_for(server: str, tool: types.Tool) -> dict[str, Any]:
    return {"mcp_server": server, "tool": tool.name, "definition_sha256": definition_sha256(tool)}


def declared_hints(tool: types.Tool) -> dict[str, bool]:
    """The tool's four hints as the upstream gave them, the spec's default for any left out."""
    given = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return {name: bool(given[name]) if name in given else default for name, default in HINT_DEFAULTS.items()}


def _classify(action_type: str, params: dict[str, Any], target: dict[str, Any], declared: dict) -> Classification:
    compiled = current_policy().compiled
    inp = ClassificationInput.build(action_type, params, target, declared, destructive_verbs=compiled.destructive_verbs)
    return compiled.classify(inp)


def _never_lowering(action_type: str, params: dict[str, Any], target: dict[str, Any], hints: dict) -> dict:
    """`hints`, unless they classify the call less strictly than the spec's defaults do."""
    if hints == HINT_DEFAULTS:
        return hints
    cautious = _classify(action_type, params, target, HINT_DEFAULTS)
    hinted = _classify(action_type, params, target, hints)
    return dict(HINT_DEFAULTS) if is_stricter(cautious, hinted) else hints


def listed_tools(server: str, tools: list[types.Tool]) -> list[types.Tool]:
    """`tools` namespaced `<server>.<tool>`, without those every call of which is prohibited."""
    listed = []
    for tool in tools:
        action_type = action_type_for(server, tool.name)
        target = target_for(server, tool)
        try:
            declared = _never_lowering(action_type, {}, target, declared_hints(tool))
            classification = _classify(action_type, {}, target, declared)
        except ActionTypeError:
            continue  # a name no rule could classify cannot be called either
        if classification.risk_level == RiskLevel.PROHIBITED and not classification.unknown_paths:
            continue
        listed.append(tool.model_copy(update={"name": action_type, "meta": None}))
    return listed


def submit_call(
    agent: Agent, server: str, tool: types.Tool, arguments: dict[str, Any], *, idempotency_key: str | None = None
) -> ApprovalRequest:
    """The call as a request, already classified (`approvals.services.submit`)."""
    found = first_problem(arguments, field="arguments")
    if found is not None:
        raise ArgumentsRefused(f"{found[0]} {found[1]}")
    if json_size(arguments) > settings.API_MAX_PARAMS_BYTES:
        raise ArgumentsRefused(f"the arguments are larger than {settings.API_MAX_PARAMS_BYTES} bytes as JSON")
    action_type = action_type_for(server, tool.name)
    target = target_for(server, tool)
    declared = _never_lowering(action_type, arguments, target, declared_hints(tool))
    data = {"action_type": action_type, "target": target, "params": arguments, "declared": declared}
    return submit_from_agent(agent, Kind.ACTION, data, idempotency_key=idempotency_key).request


def find_or_submit(
    agent: Agent, server: str, tool: types.Tool, arguments: dict[str, Any], digest: str
) -> ApprovalRequest:
    """The request an identical call already is (`held.find_retried`), or a new one."""
    found, key = held.find_retried(agent, digest, action_type=action_type_for(server, tool.name), arguments=arguments)
    if found is not None:
        return found
    return submit_call(agent, server, tool, arguments, idempotency_key=key)


def reread(request: ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest.objects.select_related("agent").get(pk=request.pk)


def claim(request: ApprovalRequest, agent: Agent, target_hash: str | None = None) -> services.ExecutionGrant:
    """Claim the approved call as its agent: re-validation (emergency stop, policy,
    expiry, and the tool's definition now, `target_hash`, against the approved
    target), the lease and the single-use grant. Raises DomainError."""
    return services.claim_execution(
        request.pk, actor=Actor.for_agent(agent), agent=agent, target_hash=target_hash, nonce=new_nonce()
    )


def complete(
    request_id: Any,
    agent: Agent,
    grant: services.ExecutionGrant,
    *,
    succeeded: bool,
    result: dict[str, Any] | None,
    error: str = "",
    code: str = "",
) -> None:
    """Report the upstream's outcome for `grant`; `result` is the result's digest, never its body."""
    try:
        services.complete_execution(
            request_id,
            token=grant.token,
            succeeded=succeeded,
            actor=Actor.for_agent(agent),
            result=result,
            error=error,
            code=code,
        )
    except DomainError:
        # A report after the lease ran out is recorded and changes nothing (leases); the
        # call itself happened either way, so its answer still goes back to the client.
        pass
