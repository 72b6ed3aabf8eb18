"""Approval requests, their parameter revisions and reviewers' decisions."""

from __future__ import annotations

import json
import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..states import Kind, RiskLevel, State, is_terminal
from .policy import PolicyVersion, RiskRule

# `decided_by_label` of decisions the policy made itself (auto-approved, prohibited).
DECIDED_BY_POLICY = "policy"

# What reviewers may answer an action with (LangChain's HITL `DecisionType` names).
# `respond`: a reply the agent's model receives instead of the tool's result.
ACTION_DECISIONS = ("approve", "edit", "reject", "respond")
# What a submission allows when it says nothing: what every host could always apply.
DEFAULT_ALLOWED_DECISIONS = ("approve", "edit", "reject")


def default_allowed_decisions() -> list[str]:
    return list(DEFAULT_ALLOWED_DECISIONS)


class ApprovalRequestQuerySet(models.QuerySet["ApprovalRequest"]):
    def pending(self):
        return self.filter(state=State.PENDING_APPROVAL)

    def overdue_for_decision(self, now=None):
        return self.filter(state=State.PENDING_APPROVAL, decide_by__lte=now or timezone.now())

    def overdue_for_execution(self, now=None):
        return self.filter(state=State.APPROVED, has_execution_step=True, execute_by__lte=now or timezone.now())


class ApprovalRequest(models.Model):
    """A tool call or plan an agent asked to run, and everything decided about it.

    `state` changes only through `approvals.services`; read `effective_state` for
    what a person should see (a pending request past its deadline reads as expired
    before the sweeper persists it).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # The agents app sits above this one: the relation names the setting, as user relations do.
    agent = models.ForeignKey(settings.APPROVALS_AGENT_MODEL, on_delete=models.PROTECT, related_name="requests")
    requested_for = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT, db_index=True)

    # What is asked
    action_type = models.CharField(max_length=200, db_index=True, help_text="Normalized (NFKC, case-folded).")
    action_type_sent = models.CharField(
        max_length=200, blank=True, help_text="As the agent spelled it: its word boundaries (camelCase) find verbs."
    )
    target = models.JSONField(default=dict, blank=True)
    target_hash = models.CharField(max_length=64, help_text="sha256 of the canonical target snapshot approved.")
    declared = models.JSONField(default=dict, blank=True, help_text="What the agent says about its own call.")
    # The agent's own account of why it asks, and links/conversation turns around the call:
    # claims a reviewer weighs (a reason is also a channel for persuading them), never
    # facts the policy reads. Shape and limits: agents/api/serializers.py.
    reason = models.TextField(blank=True, help_text="Why the agent says it wants this (its claim, plain text).")
    context = models.JSONField(default=dict, blank=True, help_text="{links: [{label, url}], turns: [{role, text}]}.")
    impact = models.JSONField(default=dict, blank=True, help_text="Computed on the server, never taken from the agent.")
    current_revision = models.PositiveIntegerField(default=1)
    has_execution_step = models.BooleanField(default=True)
    plan_path = models.CharField(max_length=1000, blank=True)
    plan_title = models.CharField(max_length=500, blank=True)
    plan_markdown = models.TextField(blank=True)

    # Correlation with the agent's run (filterable, never an authorization decision)
    # Suspensions: the paused step, the schema its answer must satisfy, and the answer.
    # Both are kept as JSON text: the host resumes with exactly the values it was
    # validated as, in that order, and the form shows the agent's fields in its order
    # (a jsonb column would reorder keys).
    workflow_id = models.CharField(max_length=200, blank=True)
    step_id = models.CharField(max_length=200, blank=True)
    resume_schema_json = models.TextField(blank=True, help_text="A suspension's resume schema, as JSON text.")
    resume_data_json = models.TextField(
        blank=True, help_text="The current revision's proposed answer (a suspension), as validated JSON text."
    )
    run_id = models.CharField(max_length=200, blank=True, db_index=True)
    thread_id = models.CharField(max_length=200, blank=True, db_index=True)
    resource_id = models.CharField(max_length=200, blank=True, db_index=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    # Client-chosen (e.g. the interrupt's id): the requests one agent step submitted
    # together, which the queue groups and a reviewer may decide at once.
    batch_id = models.CharField(max_length=200, blank=True, db_index=True)
    # NULL, not "": a request without a key is outside the (agent, idempotency_key) unique constraint.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    submission_digest = models.CharField(max_length=64, blank=True)
    # What the agent submitted (params, plan, suspend payload) as the signed decision
    # names it (hitl_controlplane.decisions.submitted_sha256), taken from the body as
    # parsed, before any storage round trip could change how a number is written.
    submitted_sha256 = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the canonical bytes of what the agent submitted."
    )

    # The decisions the agent's host can apply (a subset of ACTION_DECISIONS); the
    # services refuse any other (`decision_not_allowed`).
    allowed_decisions = models.JSONField(default=default_allowed_decisions, blank=True)

    # Classification
    risk_level = models.CharField(max_length=12, choices=RiskLevel.choices, blank=True)
    rule = models.ForeignKey(RiskRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    rule_name = models.CharField(max_length=100, blank=True, help_text="Copied, so history survives rule deletion.")
    classification = models.JSONField(default=dict, blank=True)
    policy_version = models.ForeignKey(PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    required_approvals = models.PositiveSmallIntegerField(default=1)
    approver_group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    quorum_reachable = models.BooleanField(default=True)
    escalated = models.BooleanField(default=False)

    # Deadlines and decision
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    decide_by = models.DateTimeField(null=True, blank=True, db_index=True)
    execute_by = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by_label = models.CharField(max_length=150, blank=True)
    feedback = models.TextField(blank=True)
    resolution_code = models.CharField(max_length=64, blank=True, help_text="Why it ended where it did.")

    # Execution
    grant_hash = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Server-side execution (approvals.execution.executors): which executor runs it, chosen at
    # approval, and when its task was last published; empty/null for agent-run requests.
    executor = models.CharField(max_length=50, blank=True, db_index=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)

    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded_by"
    )

    objects = ApprovalRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approvalrequest", "Can approve or reject the approval request")]
        constraints = [
            # One request per (agent, idempotency key): a unique index, never check-then-insert.
            models.UniqueConstraint(
                fields=["agent", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="one_request_per_agent_idempotency_key",
            ),
        ]
        indexes = [
            models.Index(fields=["state", "decide_by"], name="request_state_deadline"),
            # The queue's per-risk counts (approvals.web.queue_queries.queue_counts).
            models.Index(fields=["state", "risk_level", "decide_by"], name="request_state_risk_deadline"),
            models.Index(fields=["agent", "run_id", "tool_call_id"], name="request_run_tool_call"),
        ]

    def __str__(self) -> str:
        return f"{self.action_type} by {self.agent_id} ({self.state})"

    @property
    def effective_state(self) -> str:
        """The state a reader should see now, without writing anything."""
        now = timezone.now()
        if self.state == State.PENDING_APPROVAL and self.decide_by and self.decide_by <= now:
            return State.EXPIRED
        if self.state == State.APPROVED and self.has_execution_step and self.execute_by and self.execute_by <= now:
            return State.EXPIRED
        return self.state

    @property
    def approved_by_policy(self) -> bool:
        """Auto-approved as low risk: no person's approval stands behind it."""
        return self.decided_by_label == DECIDED_BY_POLICY and self.risk_level == RiskLevel.LOW

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.state, has_execution_step=self.has_execution_step)

    @property
    def execution_key(self) -> str:
        """The idempotency key every executor receives: one per approved revision."""
        return f"cp-{self.pk}-r{self.current_revision}"

    @property
    def resume_schema(self) -> dict | None:
        """A suspension's resume schema (None for other kinds), keys in the agent's order."""
        return json.loads(self.resume_schema_json) if self.resume_schema_json else None

    def current_params(self) -> dict:
        return self.revisions.get(number=self.current_revision).params

    def allows(self, decision: str) -> bool:
        """Whether the agent's host can apply `decision` (the submission's `allowed_decisions`).
        Rejecting always is: a person can always stop a call."""
        return decision == "reject" or decision in (self.allowed_decisions or DEFAULT_ALLOWED_DECISIONS)


class ParamsRevision(models.Model):
    """One numbered version of a request's params. Approve-with-edits adds one;
    approvals only ever count for the revision they were given on.
    """

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    params = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_keys = models.JSONField(default=list, blank=True)
    risk_level = models.CharField(max_length=12, choices=RiskLevel.choices, blank=True)

    class Meta:
        ordering = ["request", "number"]
        constraints = [models.UniqueConstraint(fields=["request", "number"], name="one_revision_number_per_request")]


class Decision(models.Model):
    class Verdict(models.TextChoices):
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"
        RESPOND = "respond", "Respond"

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="decisions")
    revision = models.PositiveIntegerField()
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="decisions")
    verdict = models.CharField(max_length=7, choices=Verdict.choices)
    feedback = models.TextField(blank=True)
    step_up_method = models.CharField(
        max_length=20, blank=True, help_text="How the reviewer proved presence for this decision, if it needed it."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "revision", "reviewer"], name="one_decision_per_reviewer_per_revision"
            )
        ]
