"""Pages of the rule editor (risk-admins only), and the reviewer's one-time deadline
extension. The editor's JSON endpoints are in `approvals.web.rules_json_views`, policy
history and proposals in `approvals.web.proposal_views`, decision metrics in
`approvals.web.metrics_views`.

Views are thin: they parse input and call `approvals.policy`, `approvals.policy.tuning.*`,
`approvals.notifications.dispatch` and `approvals.services`. JSON endpoints answer
``{"ok": true, ...}`` or ``{"ok": false, "code", "message", "field"?}`` with a 4xx
status, never a 500 for bad input. Pages answer a form POST with a redirect and a
flash message saying whether the change applied or waits for a second risk-admin.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from controlplane.http.errors import CodedError
from controlplane.http.inputs import parse_json_text

from .. import errors, policy, services
from ..bounds import BOUNDS
from ..errors import DomainError
from ..models import PolicyProposal, PolicyVersion, RiskRule
from ..notifications import dispatch as notifications
from ..people import Person
from ..policy import PolicyError
from ..policy.rules.conditions import OPERATORS, RuleValidationError
from ..policy.rules.engine import RULE_KEYS
from ..policy.rules.levels import LEVELS
from ..policy.rules.patterns import pattern_problems
from ..policy.tuning import editing
from .rules_http import (
    flash_outcome,
    flash_refusal,
    note_from,
    redirect_after,
    risk_admin_required,
)
from .rules_json_views import path_catalogue

# How the condition builder names each operator (the value sent stays the operator's name).
OPERATOR_LABELS = {
    "eq": "= (equals)",
    "ne": "≠ (differs)",
    "gt": "> (more than)",
    "gte": "≥ (at least)",
    "lt": "< (less than)",
    "lte": "≤ (at most)",
    "in": "is one of",
    "contains": "contains",
    "matches": "matches (regex)",
    "len_gt": "is longer than",
    "exists": "exists (true / false)",
}


@risk_admin_required
@require_GET
def rule_list(request: HttpRequest) -> HttpResponse:
    rules = list(RiskRule.objects.select_related("approver_group", "escalation_group").order_by("priority", "name"))
    latest = PolicyVersion.objects.order_by("-number").defer("rules", "diff").first()
    from audit.models import AuditEvent

    for rule in rules:  # a pattern stored before RE2 that it cannot run as written: flagged until rewritten
        rule.pattern_problems = _pattern_problems(rule)
    return render(
        request,
        "rules/list.html",
        {
            "rules": rules,
            "latest": latest,
            "proposals": list(policy.pending_proposals()),
            "pattern_problem_rules": [rule.name for rule in rules if rule.pattern_problems],
            "verbs_text": "\n".join(latest.destructive_verbs if latest else []),
            "identity_providers": [provider.get("id", "") for provider in settings.OIDC_PROVIDERS],
            "groups_claim": settings.OIDC_GROUPS_CLAIM,
            "claim_changes": list(AuditEvent.objects.filter(verb="membership.claims_applied").order_by("-seq")[:10]),
        },
    )


def _pattern_problems(rule: RiskRule) -> list[tuple[str, str]]:
    try:
        return pattern_problems(policy.rule_to_spec(rule))
    except RuleValidationError as exc:  # a row a later engine refuses outright
        return [(exc.field, exc.message)]


@risk_admin_required
@require_POST
def reorder(request: HttpRequest) -> HttpResponse:
    names = [name for name in request.POST.get("order", "").split(",") if name]
    try:
        outcome = editing.reorder(names, actor=Person.from_request(request), note=note_from(request))
    except (RuleValidationError, PolicyError) as exc:
        flash_refusal(request, exc)
        return redirect("rules:list")
    flash_outcome(request, outcome, "New order:")
    return redirect_after(outcome)


@risk_admin_required
@require_POST
def toggle(request: HttpRequest, name: str) -> HttpResponse:
    enabled = request.POST.get("enabled") == "1"
    try:
        outcome = editing.set_enabled(name, enabled, actor=Person.from_request(request), note=note_from(request))
    except (RuleValidationError, PolicyError) as exc:
        flash_refusal(request, exc)
        return redirect("rules:list")
    flash_outcome(request, outcome, f"{'Enabling' if enabled else 'Disabling'} {name}:")
    return redirect_after(outcome)


@risk_admin_required
@require_POST
def delete(request: HttpRequest, name: str) -> HttpResponse:
    try:
        outcome = policy.delete_rule(name, actor=Person.from_request(request), note=note_from(request))
    except (RuleValidationError, PolicyError) as exc:
        flash_refusal(request, exc)
        return (
            redirect("rules:edit", name=name) if RiskRule.objects.filter(name=name).exists() else redirect("rules:list")
        )
    flash_outcome(request, outcome, f"Deleting rule {name}:")
    return redirect_after(outcome)


@risk_admin_required
@require_POST
def destructive_verbs(request: HttpRequest) -> HttpResponse:
    """`verbs` (one per line; blank lines ignored) and `note`: the policy's new verb list."""
    verbs = [line.strip() for line in request.POST.get("verbs", "").splitlines() if line.strip()]
    try:
        outcome = policy.set_destructive_verbs(verbs, actor=Person.from_request(request), note=note_from(request))
    except (RuleValidationError, PolicyError) as exc:
        flash_refusal(request, exc)
        return redirect("rules:list")
    flash_outcome(request, outcome, "Destructive verbs:")
    return redirect_after(outcome)


def _editor_context(
    request: HttpRequest,
    rule: dict[str, Any],
    *,
    existing: str | None,
    error: RuleValidationError | PolicyError | None = None,
    note: str = "",
) -> dict[str, Any]:
    groups = list(Group.objects.order_by("name").values_list("name", flat=True))
    return {
        "rule": rule,
        "existing": existing,
        "bounds": BOUNDS,  # the number inputs' min and max (the server checks them regardless)
        "error": error,
        "note": note,
        "groups": groups,
        "levels": LEVELS,
        "operators": OPERATORS,
        "suggested_paths": path_catalogue(rule.get("action_type")).paths,
        "editor_config": {
            "existing": existing,
            "rule": rule,
            "urls": {
                "validate": reverse("rules:validate"),
                "dry_run": reverse("rules:dry-run"),
                "test": reverse("rules:test"),
                "samples": reverse("rules:samples"),
                "paths": reverse("rules:paths"),
            },
            "operators": [[op, OPERATOR_LABELS.get(op, op)] for op in OPERATORS],
        },
        "notification": notifications.settings_for(existing) if existing else None,
    }


NEW_RULE = {
    "name": "",
    "priority": 100,
    "enabled": True,
    "action_type": "",
    "conditions": [],
    "match": "all",
    "risk_level": "medium",
    "required_approvals": 1,
    "approver_group": "reviewers",
    "escalation_group": None,
    "decision_ttl_seconds": 3600,
    "execution_window_seconds": 900,
    "editable_params": [],
    "masked_params": [],
    "trusts_declared": False,
    "step_up": False,
}


@risk_admin_required
@require_http_methods(["GET", "POST"])
def rule_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """GET: the editor. POST: `rule_json` (the builder's rule) and `note`; one save_rule,
    which applies at once (stricter only) or waits for a second risk-admin."""
    existing = None
    if name is not None:
        stored = RiskRule.objects.select_related("approver_group", "escalation_group").filter(name=name).first()
        if stored is None:
            raise Http404("No such rule.")
        existing = name
        rule = policy.rule_to_spec(stored).to_dict()
    else:
        rule = dict(NEW_RULE)
    if request.method == "GET":
        problems = _pattern_problems(stored) if existing is not None else []
        # A pattern stored before RE2 that it cannot run: named at once, where the admin rewrites it.
        error = RuleValidationError(problems[0][0], f"pattern refused: {problems[0][1]}") if problems else None
        return render(request, "rules/edit.html", _editor_context(request, rule, existing=existing, error=error))

    note = note_from(request)
    try:
        data = parse_json_text(request.POST.get("rule_json", ""), field="rule")
    except ValueError:
        data = None
    except CodedError as refused:
        error = RuleValidationError(refused.details.get("field", "rule"), refused.message)
        return render(
            request,
            "rules/edit.html",
            _editor_context(request, rule, existing=existing, error=error, note=note),
            status=422,
        )
    if not isinstance(data, dict):
        error = RuleValidationError("rule", "the rule did not arrive; is JavaScript on?")
        return render(
            request,
            "rules/edit.html",
            _editor_context(request, rule, existing=existing, error=error, note=note),
            status=422,
        )
    if existing is not None and data.get("name") != existing:
        error = RuleValidationError("name", "a rule keeps its name; create a new rule and delete this one instead")
    elif existing is None and RiskRule.objects.filter(name=data.get("name")).exists():
        error = RuleValidationError("name", f"a rule named {data.get('name')!r} exists; edit it instead")
    else:
        error = None
    if error is None:
        try:
            outcome = policy.save_rule(data, actor=Person.from_request(request), note=note)
        except (RuleValidationError, PolicyError) as exc:
            error = exc
        else:
            flash_outcome(request, outcome, f"Rule {data['name']}:")
            return redirect_after(outcome)
    shown = {**rule, **{k: v for k, v in data.items() if k in RULE_KEYS}}
    return render(
        request,
        "rules/edit.html",
        _editor_context(request, shown, existing=existing, error=error, note=note),
        status=422,
    )


@risk_admin_required
@require_POST
def notification_settings(request: HttpRequest, name: str) -> HttpResponse:
    if not RiskRule.objects.filter(name=name).exists():
        raise Http404("No such rule.")

    def seconds(field: str) -> int | None:
        raw = request.POST.get(field, "").strip()
        if not raw:
            return None
        # ASCII digits only ("²".isdigit() is true, int() refuses it); a bounded length
        # (save_settings checks the bounds themselves, approvals.bounds).
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
            raise ValueError(f"{field}: a whole number of seconds")
        return int(raw)

    try:
        group_name = request.POST.get("escalation_group", "").strip()
        group = Group.objects.filter(name=group_name).first() if group_name else None
        if group_name and group is None:
            raise ValueError(f"escalation_group: no group named {group_name!r}")
        outcome = notifications.save_settings(
            name,
            actor=Person.from_request(request),
            note=request.POST.get("note", ""),
            notify_on_arrival=request.POST.get("notify_on_arrival") == "1",
            remind_before_seconds=seconds("remind_before_seconds"),
            escalate_after_seconds=seconds("escalate_after_seconds"),
            escalation_group=group,
            max_extension_seconds=seconds("max_extension_seconds") or 0,
            webhook_url=request.POST.get("webhook_url", "").strip(),
            slack_channel=request.POST.get("slack_channel", "").strip(),
        )
    except ValueError as exc:
        messages.error(request, f"Notification settings not saved: {exc}")
    except PolicyError as exc:
        messages.error(request, f"Notification settings not saved: {exc.message}")
    else:
        if isinstance(outcome, PolicyProposal):  # it grants something: a second risk-admin decides
            flash_outcome(request, outcome, f"Notification settings of {name}:")
            return redirect_after(outcome)
        messages.success(request, f"Notification settings of {name} saved.")
    return redirect("rules:edit", name=name)


@login_required
@require_POST
def extend_deadline(request: HttpRequest, pk) -> HttpResponse:
    """A reviewer pushes decide_by back once, within the rule's limit (`seconds`, `reason`)."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    raw = request.POST.get("seconds", "")
    try:
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:  # "²".isdigit() is true; int() refuses it
            raise DomainError(errors.EXTENSION_NOT_ALLOWED, "Say by how many seconds to extend.")
        updated = services.extend_decision_deadline(
            pk, actor=services.Person.from_request(request), seconds=int(raw), reason=request.POST.get("reason", "")
        )
    except DomainError as exc:
        if wants_json:
            return JsonResponse(exc.as_dict(), status=exc.http_status)
        messages.error(request, exc.message)
        return redirect("approvals:queue")
    message = f"Deadline extended to {updated.decide_by:%Y-%m-%d %H:%M} UTC."
    if wants_json:
        return JsonResponse({"ok": True, "message": message, "decide_by": updated.decide_by.isoformat()})
    messages.success(request, message)
    return redirect("approvals:queue")
