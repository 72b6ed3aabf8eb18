"""Agent submissions: idempotency, plan revisions and callbacks around
`approvals.services.submit`, which does the state change itself.

Idempotency (DESIGN.md): a key is scoped to the agent and backed by the unique
constraint `one_request_per_agent_idempotency_key`, never check-then-insert.
Same key and same body replays the first request; same key and another body is
422 `idempotency_key_reused`. A duplicate racing the first one blocks on the
unique index until the first commits, then replays it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError

from approvals import services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.snapshots import stable_hash
from approvals.states import Kind, State
from audit.chain import audited_atomic
from controlplane.http.codes import register
from controlplane.http.outbound import OutboundURLRefused, check_outbound_url

from .models import Agent, RequestCallback

__all__ = ["IDEMPOTENCY_KEY_REUSED", "SubmitResult", "find_by_idempotency_key", "submit_from_agent"]

IDEMPOTENCY_KEY_REUSED = register("idempotency_key_reused", 422, "The key was used before with a different body.")
# Fields that identify the call but are not part of "the same body".
_NOT_DIGESTED = frozenset({"idempotency_key"})


@dataclass(frozen=True)
class SubmitResult:
    request: ApprovalRequest
    replayed: bool
    # A new request's revision-1 params as stored (None for a replay), so the
    # response need not read them back.
    params: dict[str, Any] | None = None


def submission_digest(kind: str, data: dict[str, Any]) -> str:
    # The default `host_applies_edits` is left out, so a body sent before the field
    # existed keeps its digest (a retry across an upgrade still replays).
    body = {k: v for k, v in data.items() if k not in _NOT_DIGESTED}
    if body.get("host_applies_edits") is True:
        del body["host_applies_edits"]
    return stable_hash({"kind": kind, **body})


def find_by_idempotency_key(agent: Agent, key: str) -> ApprovalRequest | None:
    return ApprovalRequest.objects.filter(agent=agent, idempotency_key=key).first()


def _replay(existing: ApprovalRequest, digest: str) -> SubmitResult:
    if existing.submission_digest != digest:
        raise DomainError(
            IDEMPOTENCY_KEY_REUSED,
            "This Idempotency-Key was already used with a different body; use a new key for a new request.",
            request_id=str(existing.pk),
        )
    return SubmitResult(existing, replayed=True)


def previous_plan_revision(agent: Agent, path: str, thread_id: str) -> ApprovalRequest | None:
    """The latest plan at `path` (in `thread_id`, when given) if it was rejected: the one a resubmission revises."""
    plans = ApprovalRequest.objects.filter(agent=agent, kind=Kind.PLAN, plan_path=path)
    if thread_id:
        plans = plans.filter(thread_id=thread_id)
    latest = plans.order_by("-created_at").first()
    if latest is not None and latest.state == State.REJECTED:
        return latest
    return None


def _suspended_step(data: dict[str, Any]) -> dict[str, Any]:
    """A suspension's target: the step that paused (empty for actions, whose target is their own)."""
    return {key: data[key] for key in ("workflow_id", "step_id") if data.get(key)}


def submit_from_agent(agent: Agent, kind: str, data: dict[str, Any], *, idempotency_key: str | None) -> SubmitResult:
    """Submit validated API data as `agent`; replay when `idempotency_key` was seen with the same body.

    Raises DomainError (422 `idempotency_key_reused`, 422 outbound URL codes).
    """
    digest = submission_digest(kind, data)
    callback_url = data.get("callback_url")
    # A reused key is normally caught by the unique index below (the insert fails
    # and the first request is replayed), which saves a lookup on every new
    # submission. With a callback URL, look first: a replay must not re-check it.
    if idempotency_key and callback_url:
        existing = find_by_idempotency_key(agent, idempotency_key)
        if existing is not None:
            return _replay(existing, digest)
    if callback_url:
        try:
            check_outbound_url(callback_url)
        except OutboundURLRefused as exc:
            raise DomainError(exc.code, exc.message, field="callback_url") from None

    is_plan = kind == Kind.PLAN
    supersedes = previous_plan_revision(agent, data["path"], data.get("thread_id", "")) if is_plan else None
    submission = services.Submission(
        kind=kind,
        action_type=data.get("action_type", ""),
        target=data.get("target") or ({"path": data["path"]} if is_plan else _suspended_step(data)),
        # A suspension's payload is its params: rules read it as `params.*`.
        params=data.get("params") or data.get("suspend_payload") or {},
        declared=data.get("declared") or {},
        plan_path=data.get("path", ""),
        # A suspension's title and summary (Markdown) are shown where a plan's are.
        plan_title=data.get("title", ""),
        plan_markdown=data.get("plan") or data.get("summary", ""),
        workflow_id=data.get("workflow_id", ""),
        step_id=data.get("step_id", ""),
        resume_schema=data.get("resume_schema"),
        host_applies_edits=data.get("host_applies_edits", True),
        run_id=data.get("run_id", ""),
        thread_id=data.get("thread_id", ""),
        resource_id=data.get("resource_id", ""),
        tool_call_id=data.get("tool_call_id", ""),
        idempotency_key=idempotency_key or None,
        submission_digest=digest,
        supersedes=supersedes,
    )
    try:
        if callback_url:
            with audited_atomic():
                request = services.submit(submission, agent=agent)
                RequestCallback.objects.create(request=request, url=callback_url)
        else:  # submit's own transaction is the outermost: no savepoint round trips
            request = services.submit(submission, agent=agent)
    except IntegrityError:
        # Lost the race on the unique index: the winner has committed by now.
        existing = find_by_idempotency_key(agent, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        return _replay(existing, digest)
    return SubmitResult(request, replayed=False, params=submission.params)
