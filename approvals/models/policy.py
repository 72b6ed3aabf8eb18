"""The risk rules, the policy versions that snapshot them, and changes waiting for four eyes."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone

from ..states import RiskLevel


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

    class Kind(models.TextChoices):
        RULES = "rules", "Rules and destructive verbs"
        NOTIFICATIONS = "notifications", "Notification and escalation settings"
        MEMBERSHIP = "membership", "Membership of a group that can decide"

    # What the proposal changes: the rule set (`rules`, `destructive_verbs`), or, for the
    # other kinds, `payload` (`rules` then holds the base version's rules unchanged).
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.RULES)
    payload = models.JSONField(default=dict, blank=True)
    waits_because = models.TextField(blank=True, help_text="Why it needs a second risk-admin, in words.")
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
