"""A request as the API answers it, rendered by one plain function.

`request_dict` is the only renderer (the way Zulip's `MessageDict` renders
messages): the list, detail, decision and submission answers all call it, and
`ApprovalRequestSerializer` only documents its shape for the OpenAPI schema (a
test holds the two to the same fields). A plain function costs a few microseconds
a request; building a DRF serializer per request cost milliseconds on the submit
path.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.db.models import JSONField, OuterRef, QuerySet, Subquery

from ..masking import shown_impact, shown_params
from ..models import ApprovalRequest, ParamsRevision
from ..states import Kind

__all__ = ["CURRENT_PARAMS", "REQUEST_FIELDS", "request_dict", "with_current_params"]
# The annotation `with_current_params` adds: the current revision's params, read in the same query.
CURRENT_PARAMS = "current_params_value"

REQUEST_FIELDS = (
    "id",
    "kind",
    "state",
    "stored_state",
    "agent",
    "action_type",
    "target",
    "target_hash",
    "params",
    "declared",
    "reason",
    "context",
    "impact",
    "revision",
    "risk_level",
    "rule",
    "policy_version",
    "required_approvals",
    "quorum_reachable",
    "decide_by",
    "execute_by",
    "created_at",
    "decided_at",
    "decided_by",
    "feedback",
    "resolution_code",
    "plan",
    "supersedes",
    "suspension",
    "run_id",
    "thread_id",
    "resource_id",
    "tool_call_id",
    "idempotency_key",
    "result",
    "error",
    "finished_at",
    "batch_id",
    "allowed_decisions",
)


def with_current_params(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    """`requests` with their agent, the request they supersede and their current params,
    so rendering a page of them costs no query per request."""
    current = ParamsRevision.objects.filter(request=OuterRef("pk"), number=OuterRef("current_revision"))
    return requests.select_related("agent", "supersedes").annotate(
        **{CURRENT_PARAMS: Subquery(current.values("params")[:1], output_field=JSONField())}
    )


def _iso(value: datetime | None) -> str | None:
    """DRF's rendering of a datetime: ISO 8601 in UTC with a `Z`."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _params(request: ApprovalRequest, params: dict[str, Any] | None) -> dict[str, Any]:
    """The current revision's params as stored: people get them through the one
    choke point (`masking.shown_params`), an agent its own call as it sent it."""
    if params is None:
        params = getattr(request, CURRENT_PARAMS, None)
    if params is None:
        params = request.current_params()
    return params


def _suspension(request: ApprovalRequest) -> dict[str, Any]:
    answer = request.resume_data_json
    return {
        "workflow_id": request.workflow_id,
        "step_id": request.step_id,
        "title": request.plan_title,
        "summary": request.plan_markdown,
        "resume_schema": request.resume_schema,
        "answer": json.loads(answer) if answer else None,
    }


def request_dict(request: ApprovalRequest, *, params: dict[str, Any] | None = None, mask: bool = False) -> dict:
    """The JSON an API answer carries for `request`.

    `state` is the effective state (a pending request past its deadline reads as
    expired before the sweeper writes it); `stored_state` is the row's. `params`:
    the current revision's params when the caller has them (no query); `mask`:
    show the rule's masked params masked (for people; agents see their own).
    """
    classification = request.classification or {}
    previous = request.supersedes
    current = _params(request, params)
    return {
        "id": str(request.pk),
        "kind": request.kind,
        "state": request.effective_state,
        "stored_state": request.state,
        "agent": request.agent.name,
        "action_type": request.action_type,
        "target": request.target,
        "target_hash": request.target_hash,
        "params": shown_params(request, current) if mask else current,
        "declared": request.declared,
        "reason": request.reason,
        "context": request.context,
        "impact": shown_impact(request, params=current) if mask else request.impact,
        "revision": request.current_revision,
        "risk_level": request.risk_level,
        "rule": {"name": request.rule_name or None, "reason": classification.get("reason", "")},
        "policy_version": classification.get("policy_version"),
        "required_approvals": request.required_approvals,
        "quorum_reachable": request.quorum_reachable,
        "decide_by": _iso(request.decide_by),
        "execute_by": _iso(request.execute_by),
        "created_at": _iso(request.created_at),
        "decided_at": _iso(request.decided_at),
        "decided_by": request.decided_by_label,
        "feedback": request.feedback,
        "resolution_code": request.resolution_code,
        "plan": (
            {"path": request.plan_path, "title": request.plan_title, "plan": request.plan_markdown}
            if request.kind == Kind.PLAN
            else None
        ),
        "supersedes": (
            None
            if previous is None
            else {"id": str(previous.pk), "state": previous.state, "feedback": previous.feedback}
        ),
        "suspension": _suspension(request) if request.kind == Kind.SUSPENSION else None,
        "run_id": request.run_id,
        "thread_id": request.thread_id,
        "resource_id": request.resource_id,
        "tool_call_id": request.tool_call_id,
        "idempotency_key": request.idempotency_key,
        "result": request.result,
        "error": request.error,
        "finished_at": _iso(request.finished_at),
        "batch_id": request.batch_id,
        "allowed_decisions": request.allowed_decisions,
    }
