"""Django admin: rules are edited through the policy service, so every save or
delete is a validated, audited change that applies at once only when it is
provably stricter and otherwise waits for a second risk-admin (like the rule
editor, which says which happened); requests, decisions, versions and proposals
are read-only.
"""

from __future__ import annotations

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.shortcuts import redirect

from . import policy
from .masking import shown_impact
from .models import ApprovalRequest, Decision, EmergencyStop, PolicyProposal, PolicyVersion, RiskRule
from .people import Person
from .policy.rules.conditions import RuleValidationError
from .policy.rules.patterns import refuse_problem_patterns
from .web.rules_http import outcome_message


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RiskRuleForm(forms.ModelForm):
    change_note = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), help_text="Why the policy changes.")

    class Meta:
        model = RiskRule
        fields = "__all__"  # noqa: DJ007 (the admin edits a whole rule; clean() below guards the rename)

    def clean(self):
        super().clean()
        cleaned = self.cleaned_data  # what ModelForm.clean() returns (the stubs say it may be None)
        if self.instance.pk and "name" in self.changed_data:
            # Policy history tracks rules by name; a rename would read as delete + create.
            raise forms.ValidationError("Rules cannot be renamed; create a new rule instead.")
        data = _rule_data(cleaned)
        try:
            refuse_problem_patterns(policy.RuleSpec.from_dict(data))
        except RuleValidationError as exc:
            raise forms.ValidationError(f"{exc.field}: {exc.message}") from exc
        return cleaned


def _rule_data(cleaned: dict) -> dict:
    return {
        "name": cleaned.get("name"),
        "priority": cleaned.get("priority"),
        "enabled": cleaned.get("enabled"),
        "action_type": cleaned.get("action_type"),
        "conditions": cleaned.get("conditions") or [],
        "match": cleaned.get("match"),
        "risk_level": cleaned.get("risk_level"),
        "required_approvals": cleaned.get("required_approvals"),
        "approver_group": cleaned["approver_group"].name if cleaned.get("approver_group") else None,
        "escalation_group": cleaned["escalation_group"].name if cleaned.get("escalation_group") else None,
        "decision_ttl_seconds": cleaned.get("decision_ttl_seconds"),
        "execution_window_seconds": cleaned.get("execution_window_seconds"),
        "editable_params": cleaned.get("editable_params") or [],
        "masked_params": cleaned.get("masked_params") or [],
        "trusts_declared": cleaned.get("trusts_declared"),
        "step_up": cleaned.get("step_up"),
    }


@admin.register(RiskRule)
class RiskRuleAdmin(admin.ModelAdmin):
    """Only risk-admins see rules here, and every save or delete goes through
    `approvals.policy`: a change that waits for a second risk-admin writes no row and
    no LogEntry, and the page says so and links to the proposal."""

    form = RiskRuleForm
    list_display = ["priority", "name", "action_type", "risk_level", "required_approvals", "approver_group", "enabled"]
    list_display_links = ["name"]
    list_filter = ["risk_level", "enabled"]
    search_fields = ["name", "action_type"]
    actions = None

    # The service refuses anyone else; refusing here too gives a 403 page, not a 500.
    def has_view_permission(self, request, obj=None):
        return policy.is_risk_admin(request.user) and super().has_view_permission(request, obj)

    def has_add_permission(self, request):
        return policy.is_risk_admin(request.user) and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return policy.is_risk_admin(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return policy.is_risk_admin(request.user) and super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change):
        outcome = policy.save_rule(
            _rule_data(form.cleaned_data), actor=Person.from_request(request), note=form.cleaned_data["change_note"]
        )
        request.policy_outcome = outcome
        if isinstance(outcome, PolicyVersion):
            obj.pk = RiskRule.objects.get(name=obj.name).pk

    def delete_model(self, request, obj):
        outcome = policy.delete_rule(
            obj.name, actor=Person.from_request(request), note=f"Deleted in admin by {request.user}"
        )
        request.policy_outcome = outcome
        if isinstance(outcome, PolicyVersion):
            # The rule is already gone, so no queryset holds it; Django's own delete_view passes
            # a list too (log_deletions only iterates), though the stubs ask for a QuerySet.
            super().log_deletions(request, [obj])  # type: ignore[arg-type]

    def log_addition(self, request, obj, message):
        return None if _waiting(request) else super().log_addition(request, obj, message)

    def log_change(self, request, obj, message):
        return None if _waiting(request) else super().log_change(request, obj, message)

    def log_deletions(self, request, queryset):
        return None  # logged by delete_model, once the policy says whether it applied

    def response_add(self, request, obj, post_url_continue=None):
        return _said(request) or super().response_add(request, obj, post_url_continue)

    def response_change(self, request, obj):
        return _said(request) or super().response_change(request, obj)

    def response_delete(self, request, obj_display, obj_id):
        return _said(request) or super().response_delete(request, obj_display, obj_id)


def _waiting(request) -> bool:
    return isinstance(getattr(request, "policy_outcome", None), PolicyProposal)


def _said(request):
    """Say what the change did; a waiting change redirects to its proposal page."""
    outcome = getattr(request, "policy_outcome", None)
    if outcome is None:
        return None
    if isinstance(outcome, PolicyProposal):
        messages.warning(request, outcome_message(outcome))
        return redirect("rules:proposal", pk=outcome.pk)
    messages.info(request, outcome_message(outcome))
    return None


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ["number", "created_at", "created_by_label", "approved_by_label", "note"]


@admin.register(PolicyProposal)
class PolicyProposalAdmin(ReadOnlyAdmin):
    """Decided on the rules pages (/rules/proposals/<id>/), never here."""

    list_display = ["pk", "created_at", "proposed_by_label", "status", "decided_by_label", "note"]
    list_filter = ["status"]


class DecisionInline(admin.TabularInline):
    model = Decision
    extra = 0
    can_delete = False
    readonly_fields = ["revision", "reviewer", "verdict", "feedback", "created_at"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "action_type", "agent", "state", "risk_level", "rule_name", "created_at", "decide_by"]
    list_filter = ["state", "risk_level", "kind"]
    search_fields = ["id", "action_type", "run_id", "tool_call_id"]
    list_select_related = ["agent"]
    inlines = [DecisionInline]
    # The impact facts that may copy a masked param (the amount) leave through the one choke point here too.
    exclude = ["impact"]
    readonly_fields = ["impact_as_shown"]

    @admin.display(description="impact")
    def impact_as_shown(self, obj: ApprovalRequest) -> str:
        return json.dumps(shown_impact(obj), ensure_ascii=False, sort_keys=True)


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ["request", "revision", "reviewer", "verdict", "created_at"]
    list_select_related = ["reviewer"]


# --- Emergency stop (execution engine) ------------------------------------------------


@admin.register(EmergencyStop)
class EmergencyStopAdmin(admin.ModelAdmin):
    """Flip switches here: saving goes through `set_emergency_stop` (audited, announced)."""

    list_display = ["__str__", "on", "reason", "changed_by_label", "changed_at"]
    fields = ["agent", "on", "reason"]
    actions = None

    def get_readonly_fields(self, request, obj=None):
        return ["agent"] if obj is not None else []

    def has_delete_permission(self, request, obj=None):
        return False  # switch it off instead: the row is its history's anchor

    def save_model(self, request, obj, form, change):
        from .emergency import set_emergency_stop

        set_emergency_stop(
            on=form.cleaned_data["on"],
            agent=obj.agent,
            actor=Person.from_request(request),
            reason=form.cleaned_data.get("reason", ""),
        )
        saved = EmergencyStop.objects.get(scope=EmergencyStop.scope_for(obj.agent))
        obj.pk = saved.pk


# --- People: adding someone to a group that can decide waits for a second risk-admin ------------


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class FourEyesUserAdmin(UserAdmin):
    """Django's user admin, except that adding a person to a group that can decide
    something (or to risk-admins) is not saved: it becomes a policy proposal that a
    second risk-admin approves on the rules pages, and the page says so. Removing
    people from groups applies at once (it only narrows)."""

    def get_readonly_fields(self, request, obj=None):
        # A superuser, or a direct policy or decide permission, is a risk-admin (or decider)
        # that no group membership shows: not settable here while four eyes holds.
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "is_superuser", "user_permissions"] if settings.POLICY_FOUR_EYES else fields

    def save_model(self, request, obj, form, change):
        from .policy import membership_gate

        if settings.POLICY_FOUR_EYES and change and "is_active" in form.changed_data and obj.is_active:
            # Reactivating someone gives them back whatever their groups decide.
            waits = membership_gate.membership_waits_because(
                {name: {obj.pk} for name in obj.groups.values_list("name", flat=True)}
            )
            if waits is not None:
                obj.is_active = False
                messages.error(
                    request,
                    f"{obj.get_username()} stays inactive: {waits} (reactivating them gives "
                    "back what their groups decide). Remove them from those groups, reactivate "
                    "them, then add them back: each addition is a proposal.",
                )
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        from .policy import membership_gate

        user = form.instance
        wanted = list(form.cleaned_data.get("groups") or [])
        current = set(user.groups.values_list("pk", flat=True)) if change else set()
        waiting = []
        if settings.POLICY_FOUR_EYES and "groups" in form.cleaned_data:
            for group in wanted:
                if group.pk not in current and membership_gate.membership_waits_because({group.name: {user.pk}}):
                    waiting.append(group)
            if waiting:
                form.cleaned_data["groups"] = [group for group in wanted if group not in waiting]
        super().save_related(request, form, formsets, change)
        for group in waiting:
            proposal = membership_gate.propose_membership(
                group, [user], acting_user=request.user, note=f"Add {user.get_username()} to {group.name} (admin)"
            )
            if proposal is not None:
                messages.warning(
                    request,
                    f"Adding {user.get_username()} to {group.name} waits for a second "
                    f"risk-admin: {proposal.waits_because} (proposal {proposal.pk}).",
                )


if admin.site.is_registered(Group):
    admin.site.unregister(Group)


@admin.register(Group)
class FourEyesGroupAdmin(GroupAdmin):
    """Django's group admin, except that while four eyes holds a group's permissions
    cannot be changed here (the policy permission makes every member a risk-admin), nor
    an existing group renamed (rules and requests name their groups: a rename re-routes)."""

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if not settings.POLICY_FOUR_EYES:
            return fields
        return [*fields, "permissions", *(["name"] if obj is not None else [])]
