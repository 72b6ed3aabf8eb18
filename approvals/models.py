"""Approval requests, their parameter revisions and reviewers' decisions, and the
risk rules and policy versions that classify them.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils import timezone
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from .states import Kind, RiskLevel, State, is_terminal


# --- Policy -----------------------------------------------------------------


class RiskRule(models.Model):
    """One admin-tuned rule. Saved only through `approvals.policy`, which
    validates it and records a new policy version; never edit rows by hand.
    """

    class Match(models.TextChoices):
        ALL = "all", "All conditions hold"
        ANY = "any", "Any condition holds"

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    priority = models.IntegerField(default=100, help_text="Lower runs first; the first enabled match wins.")
    enabled = models.BooleanField(default=True)
    action_type = models.CharField(max_length=200, help_text="Glob over the action type, e.g. read_* .")
    conditions = models.JSONField(default=list, blank=True)
    match = models.CharField(max_length=3, choices=Match.choices, default=Match.ALL)
    risk_level = models.CharField(max_length=12, choices=RiskLevel.choices)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    approver_group = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="+")
    escalation_group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    decision_ttl_seconds = models.PositiveIntegerField(default=3600)
    execution_window_seconds = models.PositiveIntegerField(default=900)
    editable_params = models.JSONField(default=list, blank=True)
    masked_params = models.JSONField(default=list, blank=True)
    trusts_declared = models.BooleanField(
        default=False, help_text="Let this rule read what the agent declares about its own call (declared.*)."
    )
    step_up = models.BooleanField(
        default=False, help_text="Deciding needs a step-up proof whatever the level (critical always does)."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "name"]

    def __str__(self) -> str:
        return self.name


class PolicyVersion(models.Model):
    """An immutable snapshot of the whole rule set, made by every rule change."""

    number = models.PositiveIntegerField(unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_label = models.CharField(max_length=150)
    note = models.TextField()
    rules = models.JSONField(help_text="RuleSpec dicts, the exact rule set classification compiles.")
    destructive_verbs = models.JSONField(
        default=list, help_text="Words that keep a low rule from auto-approving an action type containing them."
    )
    diff = models.JSONField(default=dict)
    # Four eyes: who approved a change that was not provably stricter (empty when it applied at once).
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by_label = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-number"]
        get_latest_by = "number"

    def __str__(self) -> str:
        return f"policy v{self.number}"


class PolicyProposal(models.Model):
    """A policy change waiting for a second risk-admin (four eyes).

    Holds the complete proposed rule set and verb list, made against `base_version`;
    it applies only while that is still the newest version, so approving never
    silently undoes a change made in between. Written only through `approvals.policy`.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for a second risk-admin"
        APPLIED = "applied", "Approved and applied"
        REJECTED = "rejected", "Rejected"
        WITHDRAWN = "withdrawn", "Withdrawn by its author"
        STALE = "stale", "Outdated by a later policy change"

    created_at = models.DateTimeField(default=timezone.now)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    proposed_by_label = models.CharField(max_length=150)
    note = models.TextField()
    base_version = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="proposals"
    )
    rules = models.JSONField(help_text="The complete proposed rule set (RuleSpec dicts).")
    destructive_verbs = models.JSONField(default=list)
    diff = models.JSONField(default=dict)
    dry_run = models.JSONField(default=dict, blank=True, help_text="The replay summary shown to the approver.")
    restored_from = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_label = models.CharField(max_length=150, blank=True)
    decision_note = models.TextField(blank=True)
    applied_version = models.OneToOneField(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="applied_from"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"policy proposal {self.pk} ({self.status})"


# --- Requests -----------------------------------------------------------------

# `decided_by_label` of decisions the policy made itself (auto-approved, prohibited).
DECIDED_BY_POLICY = "policy"


class ApprovalRequestQuerySet(models.QuerySet):
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
    kind = models.CharField(max_length=6, choices=Kind.choices)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="requests")
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
    impact = models.JSONField(default=dict, blank=True, help_text="Computed on the server, never taken from the agent.")
    current_revision = models.PositiveIntegerField(default=1)
    has_execution_step = models.BooleanField(default=True)
    plan_path = models.CharField(max_length=1000, blank=True)
    plan_title = models.CharField(max_length=500, blank=True)
    plan_markdown = models.TextField(blank=True)

    # Correlation with the agent's run (filterable, never an authorization decision)
    run_id = models.CharField(max_length=200, blank=True, db_index=True)
    thread_id = models.CharField(max_length=200, blank=True, db_index=True)
    resource_id = models.CharField(max_length=200, blank=True, db_index=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    submission_digest = models.CharField(max_length=64, blank=True)

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
            # The queue's per-risk counts (approvals.web.dashboard.queue_counts).
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
        if (
            self.state == State.APPROVED
            and self.has_execution_step
            and self.execute_by
            and self.execute_by <= now
        ):
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

    def current_params(self) -> dict:
        return self.revisions.get(number=self.current_revision).params


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


# --- Object permissions (guardian, direct foreign keys for the hot table) ----


class ApprovalRequestUserObjectPermission(UserObjectPermissionBase):
    content_object = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE)


class ApprovalRequestGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE)


# --- Emergency stop -------------------------------------------------------------


class EmergencyStop(models.Model):
    """The run-time emergency stop switches: one global row (agent null) and one per
    stopped agent. Flip them only through `approvals.emergency.set_emergency_stop`,
    which audits the change and tells reviewers' screens; read them only through
    `approvals.emergency.is_stopped`.
    """

    GLOBAL = "global"

    # "global", or "agent:<id>": a unique key, so a scope never has two switches.
    scope = models.CharField(max_length=40, unique=True, editable=False)
    agent = models.OneToOneField(
        "agents.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="emergency_switch"
    )
    on = models.BooleanField(default=False)
    reason = models.TextField(blank=True)
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_by_label = models.CharField(max_length=150, blank=True)

    @staticmethod
    def scope_for(agent) -> str:
        return EmergencyStop.GLOBAL if agent is None else f"agent:{agent.pk}"

    def __str__(self) -> str:
        scope = f"agent {self.agent}" if self.agent_id else "global"
        return f"emergency stop ({scope}): {'ON' if self.on else 'off'}"


# --- Notifications and deadline extensions (approvals/notifications/models.py) ------

from .notifications.models import (  # noqa: E402,F401  (models of this app, defined beside their feature)
    DeadlineExtension,
    DeliveryAttempt,
    Notification,
    RuleNotification,
)
