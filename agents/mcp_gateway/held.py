"""Held calls: which request a repeated call is, what it answers, and the results kept for retries.

**The retry key.** An MCP client retries a held call by calling the tool again: a
new JSON-RPC id every time, and no conversation id in the protocol (2025-11-25 and
2026-07-28 alike). So a call is identified by the agent (idempotency keys are scoped
to it), the action type `<server>.<tool>`, the canonical digest of its arguments,
and the client's own call id when it sends one as `_meta["controlplane/call_id"]`
(two deliberate identical calls then stay two requests). The request's
idempotency key is `mcp:<that digest>:<generation>`, so the submit service's unique
(agent, key) index makes two identical calls racing each other one request.

**The window.** The latest request under the digest answers an identical call while
it is undecided or running; after it ran (succeeded, failed, outcome unknown) until
its `execute_by`, unless the policy approved it (a low call that ran is not reused); after it ended without running (rejected by a reviewer, expired,
cancelled, refused at re-validation) for `MCP_RETRY_WINDOW_SECONDS` from its end,
so the model hears the feedback. A policy refusal (`prohibited_by_policy`) is not
reused. Outside the window the call is a new request, the next generation.

**Stored results.** The upstream's result (rebuilt, without its `_meta`) is kept in
the cache (`CACHES["default"]`: Redis when `REDIS_URL` is set, shared by every
process) under the request's id, at most `MCP_RESULT_MAX_BYTES` as JSON, until the
request's `execute_by` (at least a minute). Only the gateway reads it, answering the
request's own agent (the lookup is by that agent's key); it is not in the API, the
pages or the audit log, which keep its digest (`request.result`). A kept result whose
digest is not the request's is not returned. A retry after success never calls the
upstream again: the request is no longer `approved`, so there is nothing to claim.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import mcp_types as types
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from agents.models import Agent
from agents.resume import resume_payload
from approvals.models import ApprovalRequest
from approvals.snapshots import stable_hash
from approvals.states import Kind, State
from controlplane.http.fields import json_size
from hitl_controlplane.submitted import submitted_sha256

__all__ = [
    "CALL_ID_META",
    "call_digest",
    "find_retried",
    "keep_result",
    "kept_result",
    "next_key",
    "result_digest",
    "stopped_text",
]

CALL_ID_META = "controlplane/call_id"
_PREFIX = "mcp:"
_UNDECIDED = frozenset({State.PENDING_APPROVAL, State.APPROVED, State.EXECUTING})
_RAN = frozenset({State.SUCCEEDED, State.FAILED})


def call_digest(action_type: str, arguments: dict[str, Any], call_id: str = "") -> str:
    return stable_hash({"action_type": action_type, "arguments": arguments, "call_id": call_id})


def _in_window(request: ApprovalRequest, now: Any) -> bool:
    if request.state in _UNDECIDED:
        return True
    if request.resolution_code == "prohibited_by_policy":
        return False
    ran = request.state in _RAN and request.attempts > 0 and request.resolution_code not in _NOT_RUN_CODES
    if ran:
        # A call the policy let through (low) is a fresh call each time once it ran: the
        # window keeps people's decisions, not a cache of tool results.
        if request.approved_by_policy:
            return False
        return request.execute_by is not None and request.execute_by > now
    ended = request.finished_at or request.decided_at or request.created_at
    return ended + timedelta(seconds=settings.MCP_RETRY_WINDOW_SECONDS) > now


# Failures at re-validation: the claim was refused, the tool never ran.
_NOT_RUN_CODES = frozenset(
    {
        "approval_expired",
        "target_changed_reapproval_required",
        "approver_permission_revoked",
        "policy_changed_reapproval_required",
    }
)


def _latest(agent: Agent, digest: str) -> ApprovalRequest | None:
    return (
        ApprovalRequest.objects.filter(agent=agent, idempotency_key__startswith=f"{_PREFIX}{digest}:")
        .select_related("agent")
        .order_by("-created_at")
        .first()
    )


def find_retried(
    agent: Agent, digest: str, *, action_type: str, arguments: dict[str, Any]
) -> tuple[ApprovalRequest | None, str]:
    """The request an identical call is (None when there is none in the window), and the
    idempotency key a new request for it takes.

    A request under the key that is not this call (the agent can choose any key through
    the REST API: another action type, other params, no MCP target) is never taken for
    it; the call opens the next generation instead."""
    latest = _latest(agent, digest)
    if latest is not None and _in_window(latest, timezone.now()) and _is_this_call(latest, action_type, arguments):
        return latest, latest.idempotency_key or ""
    return None, next_key(digest, latest)


def _is_this_call(request: ApprovalRequest, action_type: str, arguments: dict[str, Any]) -> bool:
    try:
        sent = submitted_sha256(Kind.ACTION, params=arguments)
    except (TypeError, ValueError):
        return False
    return (
        request.kind == Kind.ACTION
        and request.action_type == action_type
        and bool((request.target or {}).get("mcp_server"))
        and request.submitted_sha256 == sent
    )


def next_key(digest: str, latest: ApprovalRequest | None) -> str:
    generation = int((latest.idempotency_key or "0").rsplit(":", 1)[-1]) + 1 if latest is not None else 1
    return f"{_PREFIX}{digest}:{generation}"


# --- Results ------------------------------------------------------------------------------


def result_digest(result: types.CallToolResult) -> dict[str, Any]:
    """What the request keeps of an upstream result: its sha256 and size, not its body."""
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"sha256": stable_hash(body), "bytes": json_size(body), "is_error": bool(result.is_error)}


def _cache_key(request_id: Any) -> str:
    return f"mcp-result:{request_id}"


def keep_result(request: ApprovalRequest, result: types.CallToolResult) -> bool:
    """Keep `result` for retries of `request`; False when it is over the size cap."""
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    if len(text.encode()) > settings.MCP_RESULT_MAX_BYTES:
        return False
    until = request.execute_by or timezone.now()
    seconds = max(60, int((until - timezone.now()).total_seconds()))
    cache.set(_cache_key(request.pk), text, timeout=seconds)
    return True


def kept_result(request: ApprovalRequest) -> types.CallToolResult | None:
    """The kept result of `request`, if it is still kept and is the one its digest names."""
    text = cache.get(_cache_key(request.pk))
    if not isinstance(text, str):
        return None
    body = json.loads(text)
    if not isinstance(request.result, dict) or stable_hash(body) != request.result.get("sha256"):
        return None
    return types.CallToolResult.model_validate(body)


# --- Answers for a request that will not run (now) ------------------------------------------


def decided_text(request: ApprovalRequest) -> str:
    """The action `tool_result` text the API gives for this decision, and the request's id."""
    text = resume_payload(request).get("tool_result") or "The call was not run."
    return f"{text}\n\n(The tool was not run. Request {request.pk}.)"


def stopped_text(request: ApprovalRequest) -> str:
    return f"The approved call waits while the emergency stop is on; call again later. Request {request.pk}."
