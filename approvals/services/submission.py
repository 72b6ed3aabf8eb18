"""An agent's submission: written once, already classified into its first state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from django.utils import timezone

from audit.chain import Actor, audited_atomic, digest, record
from audit.privacy import params_digest
from hitl_controlplane.decisions import submitted_sha256

from .. import errors
from ..emergency import is_stopped
from ..errors import DomainError
from ..models import DECIDED_BY_POLICY, DEFAULT_ALLOWED_DECISIONS, ApprovalRequest, ParamsRevision
from ..permissions import eligible_approver_count, grant_group
from ..policy.rules.names import ActionTypeError, ActionTypeName, parse_action_type
from ..resume_schema import check_resume_schema
from ..snapshots import snapshot_hash
from ..states import Kind, RiskLevel, State
from .classification import Classified, apply_classification, classify_params
from .core import SYSTEM, transition
from .escalation import check_quorum_reachable
from .execution import server_executor

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = ["PLAN_ACTION_TYPE", "Submission", "classify", "submit"]

PLAN_ACTION_TYPE = "submit_plan"


@dataclass(frozen=True)
class Submission:
    """What an agent asks for. The API validates shapes and sizes before this."""

    kind: str
    action_type: str = ""
    target: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    declared: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    plan_path: str = ""
    plan_title: str = ""
    plan_markdown: str = ""
    # False when the host can only run the call as submitted (no edits are offered then).
    run_id: str = ""
    thread_id: str = ""
    resource_id: str = ""
    tool_call_id: str = ""
    batch_id: str = ""
    # None: the default (`models.DEFAULT_ALLOWED_DECISIONS`).
    allowed_decisions: list[str] | None = None
    idempotency_key: str | None = None
    submission_digest: str = ""
    requested_for: Any = None
    supersedes: ApprovalRequest | None = None
    # Suspensions: `params` is the suspend payload; the answer must satisfy `resume_schema`.
    workflow_id: str = ""
    step_id: str = ""
    resume_schema: dict[str, Any] | None = None


def submit(submission: Submission, *, agent: Agent) -> ApprovalRequest:
    """Create a request from an agent's submission and classify it at once.

    The action type is normalized first (NFKC, case-folded, surrounding junk
    stripped); a name outside the documented syntax raises DomainError
    `invalid_action_type` (422). The row is written once, already in the state
    classification decides (the draft exists only in memory), with its first
    params revision and the approver group's permissions; the audit trail is the
    same as a draft inserted and then moved: `request.submitted`, then the
    transition.

    A suspension's resume schema is checked first (`approvals.resume_schema`: 422
    codes for a schema the server will not validate answers against).

    Raises IntegrityError when the agent already used `idempotency_key`; the API
    replays the first response in that case.
    """
    is_plan = submission.kind == Kind.PLAN
    is_suspension = submission.kind == Kind.SUSPENSION
    if is_suspension:
        check_resume_schema(submission.resume_schema)
    name = _action_type_name(PLAN_ACTION_TYPE if is_plan else submission.action_type)
    request = ApprovalRequest(
        kind=submission.kind,
        # The field's static type is the class APPROVALS_AGENT_MODEL names, which approvals
        # may not import; `agent` is one, typed here only as what approvals reads of it.
        agent=cast(Any, agent),
        requested_for=submission.requested_for,
        action_type=name.normalized,
        action_type_sent=name.sent,
        target=submission.target,
        target_hash=snapshot_hash(name.normalized, submission.target),
        declared=submission.declared,
        reason=submission.reason,
        context=submission.context,
        has_execution_step=submission.kind == Kind.ACTION,
        plan_path=submission.plan_path,
        plan_title=submission.plan_title,
        plan_markdown=submission.plan_markdown,
        run_id=submission.run_id,
        thread_id=submission.thread_id,
        resource_id=submission.resource_id,
        tool_call_id=submission.tool_call_id,
        batch_id=submission.batch_id,
        allowed_decisions=(
            list(submission.allowed_decisions) if submission.allowed_decisions else list(DEFAULT_ALLOWED_DECISIONS)
        ),
        idempotency_key=submission.idempotency_key,
        submission_digest=submission.submission_digest,
        submitted_sha256=submitted_digest(submission),
        supersedes=submission.supersedes,
        workflow_id=submission.workflow_id,
        step_id=submission.step_id,
        resume_schema_json=json.dumps(submission.resume_schema, ensure_ascii=False) if is_suspension else "",
    )
    with audited_atomic():
        record(
            "request.submitted",
            actor=Actor.for_agent(agent),
            request=request,
            metadata={
                "kind": request.kind,
                "action_type": request.action_type,
                **({"action_type_sent": name.sent} if name.sent != name.normalized else {}),
                "params": params_digest(request.action_type, submission.params),
                "target_hash": request.target_hash,
                **({"plan": digest(submission.plan_markdown), "plan_path": submission.plan_path} if is_plan else {}),
                **({"supersedes": str(submission.supersedes.pk)} if submission.supersedes else {}),
                **_claims_metadata(submission),
                **({"resume_schema": digest(submission.resume_schema)} if is_suspension else {}),
            },
        )
        classify(request, params=submission.params)
    return request


def _claims_metadata(submission: Submission) -> dict[str, Any]:
    """That the agent gave a reason or context, as digests (keyed HMAC + size): the
    chain can later prove what the reviewer was shown without holding the text."""
    claims: dict[str, Any] = {}
    if submission.reason:
        claims["reason"] = digest(submission.reason)
    if submission.context:
        claims["context"] = {
            **digest(submission.context),
            "links": len(submission.context.get("links", ())),
            "turns": len(submission.context.get("turns", ())),
        }
    return claims


def submitted_digest(submission: Submission) -> str:
    """What the agent submitted, digested as the signed decision names it (decisions.submitted_sha256).

    "" for params JSON cannot carry (only a caller inside the server could pass them): the
    resume then digests revision 1 as stored.
    """
    try:
        if submission.kind == Kind.PLAN:
            return submitted_sha256(Kind.PLAN, path=submission.plan_path, plan=submission.plan_markdown)
        return submitted_sha256(str(submission.kind), params=submission.params)
    except (TypeError, ValueError):
        return ""


def _action_type_name(raw: str) -> ActionTypeName:
    try:
        return parse_action_type(raw)
    except ActionTypeError as error:
        raise DomainError(errors.INVALID_ACTION_TYPE, str(error), field="action_type") from None


def classify(request: ApprovalRequest, *, params: dict[str, Any]) -> None:
    """Decide a new draft's fate under the current policy: auto-approve, queue or refuse.

    `request` is a draft not written yet (`submit` builds it); this inserts it in
    the state decided, with revision 1 of `params`. During an emergency stop
    nothing auto-approves; low-risk requests queue for people instead. A low-risk
    suspension queues as well: its answer is data only a person can give.
    """
    classified = classify_params(request, params)
    classification = classified.classification
    apply_classification(request, classified)
    now = timezone.now()
    why = {
        "risk_level": classification.risk_level,
        "rule": classification.rule_name,
        "policy_version": classification.policy_version,
        "reason": classification.reason,
    }

    if classification.risk_level == RiskLevel.PROHIBITED:
        transition(
            request,
            State.REJECTED,
            actor=SYSTEM,
            metadata=why,
            insert=True,
            resolution_code="prohibited_by_policy",
            decided_at=now,
            decided_by_label=DECIDED_BY_POLICY,
            feedback=f"Refused by policy: {classification.reason}",
        )
        _first_revision(request, params, classified)
        return
    # A suspension waits for an answer only a person can give: low risk queues it too.
    answer_needed = request.kind == Kind.SUSPENSION
    if classification.risk_level == RiskLevel.LOW and not answer_needed and not is_stopped(request.agent):
        transition(
            request,
            State.APPROVED,
            actor=SYSTEM,
            metadata=why,
            insert=True,
            resolution_code="auto_approved",
            decided_at=now,
            decided_by_label=DECIDED_BY_POLICY,
            execute_by=now + timedelta(seconds=classification.execution_window_seconds),
            executor=server_executor(request),
        )
        _first_revision(request, params, classified)
        return
    if classification.risk_level == RiskLevel.LOW:
        why["answer_needed" if answer_needed else "emergency_stop"] = True
    transition(
        request,
        State.PENDING_APPROVAL,
        actor=SYSTEM,
        metadata=why,
        insert=True,
        decide_by=now + timedelta(seconds=classification.decision_ttl_seconds),
    )
    _first_revision(request, params, classified)
    check_quorum_reachable(request, eligible=eligible_approver_count(request))


def _first_revision(request: ApprovalRequest, params: dict[str, Any], classified: Classified) -> None:
    """Revision 1 of a just-inserted request, and view + decide for its approver group.
    A refused request gets no approvers, but its group still sees it: reviewers find
    what policy refused in their history (without view, "Prohibited" matched nothing)."""
    risk_level = classified.classification.risk_level
    ParamsRevision.objects.create(request=request, number=1, params=params, risk_level=risk_level)
    if request.approver_group is not None:
        grant_group(request, request.approver_group, decide=risk_level != RiskLevel.PROHIBITED)
