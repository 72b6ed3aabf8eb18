"""Pages and JSON endpoints of the rule editor (risk-admins only), policy history,
decision metrics, and the reviewer's one-time deadline extension.

Views are thin: they parse input and call `approvals.policy`,
`approvals.tuning.*`, `approvals.notifications.dispatch` and `approvals.services`.
JSON endpoints answer ``{"ok": true, ...}`` or ``{"ok": false, "code", "message",
"field"?}`` with a 4xx status, never a 500 for bad input. Pages answer a form
POST with a redirect and a flash message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from . import policy, services
from .errors import DomainError
from .models import RiskRule
from .notifications import dispatch as notifications
from .permissions import RISK_ADMINS
from .rules.conditions import OPERATORS, RuleValidationError
from .rules.engine import RULE_KEYS
from .rules.levels import LEVELS
from .tuning import charts, editing, history as policy_history, metrics
from .tuning import dry_run as dry_runs

MAX_JSON_BODY = 1_000_000
# Paths the condition builder suggests (impact.* is computed on the server).
SUGGESTED_PATHS = (
    "impact.recipient_count", "impact.amount", "impact.target_count", "impact.reversible", "impact.sensitive",
    "impact.sensitive_kinds", "params.to", "params.subject", "params.amount", "target.mailbox",
)


# --- Access --------------------------------------------------------------------------------


def is_risk_admin(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and (
        user.is_superuser or user.groups.filter(name=RISK_ADMINS).exists()))


def _error(code: str, message: str, *, status: int = 400, **extra: Any) -> JsonResponse:
    return JsonResponse({"ok": False, "code": code, "message": message, **extra}, status=status)


def risk_admin_required(view: Callable) -> Callable:
    """Anonymous: to the login page. Signed in but not a risk admin: 403 (JSON for
    .json/.csv endpoints and fetches, a page otherwise)."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not is_risk_admin(request.user):
            if request.path.endswith(".json") or "application/json" in request.headers.get("Accept", ""):
                return _error("not_permitted", "Only risk admins may tune rules.", status=403)
            return render(request, "rules/forbidden.html", status=403)
        return view(request, *args, **kwargs)

    return wrapper


def _json_body(request: HttpRequest) -> dict[str, Any]:
    if len(request.body) > MAX_JSON_BODY:
        raise _BadInput("too_large", "The request body is too large.")
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
        raise _BadInput("invalid_json", "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise _BadInput("invalid_json", "The request body must be a JSON object.")
    return data


class _BadInput(Exception):
    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


def _json_endpoint(view: Callable) -> Callable:
    """Turn input errors into JSON 4xx answers."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except _BadInput as exc:
            return _error(exc.code, exc.message, **({"field": exc.field} if exc.field else {}))
        except RuleValidationError as exc:
            return _error("invalid_rule", exc.message, status=422, field=exc.field)

    return wrapper


def _note(request: HttpRequest) -> str:
    return request.POST.get("note", "").strip()


def _flash_rule_error(request: HttpRequest, exc: RuleValidationError) -> None:
    messages.error(request, f"Nothing was saved: {exc.field}: {exc.message}")


# --- The rule list, reordering, enable/disable, delete -------------------------------------------


@risk_admin_required
@require_GET
def rule_list(request: HttpRequest) -> HttpResponse:
    rules = list(RiskRule.objects.select_related("approver_group", "escalation_group").order_by("priority", "name"))
    latest = policy_history.versions().first()
    return render(request, "rules/list.html", {"rules": rules, "latest": latest})


@risk_admin_required
@require_POST
def reorder(request: HttpRequest) -> HttpResponse:
    names = [name for name in request.POST.get("order", "").split(",") if name]
    try:
        version = editing.reorder(names, acting_user=request.user, note=_note(request))
    except RuleValidationError as exc:
        _flash_rule_error(request, exc)
    else:
        messages.success(request, f"New order saved as policy v{version.number}.")
    return redirect("rules:list")


@risk_admin_required
@require_POST
def toggle(request: HttpRequest, name: str) -> HttpResponse:
    enabled = request.POST.get("enabled") == "1"
    try:
        version = editing.set_enabled(name, enabled, acting_user=request.user, note=_note(request))
    except RuleValidationError as exc:
        _flash_rule_error(request, exc)
    else:
        messages.success(request, f"Rule {name} {'enabled' if enabled else 'disabled'} (policy v{version.number}).")
    return redirect("rules:list")


@risk_admin_required
@require_POST
def delete(request: HttpRequest, name: str) -> HttpResponse:
    try:
        policy.delete_rule(name, acting_user=request.user, note=_note(request))
    except RuleValidationError as exc:
        _flash_rule_error(request, exc)
        return redirect("rules:edit", name=name) if RiskRule.objects.filter(name=name).exists() else redirect(
            "rules:list")
    messages.success(request, f"Rule {name} deleted.")
    return redirect("rules:list")


# --- Create and edit ---------------------------------------------------------------------------------


def _editor_context(request: HttpRequest, rule: dict[str, Any], *, existing: str | None,
                    error: RuleValidationError | None = None, note: str = "") -> dict[str, Any]:
    groups = list(Group.objects.order_by("name").values_list("name", flat=True))
    return {
        "rule": rule,
        "existing": existing,
        "error": error,
        "note": note,
        "groups": groups,
        "levels": LEVELS,
        "operators": OPERATORS,
        "suggested_paths": SUGGESTED_PATHS,
        "editor_config": {
            "existing": existing,
            "rule": rule,
            "urls": {
                "validate": reverse("rules:validate"),
                "dry_run": reverse("rules:dry-run"),
                "test": reverse("rules:test"),
                "samples": reverse("rules:samples"),
            },
            "operators": list(OPERATORS),
        },
        "notification": notifications.settings_for(existing) if existing else None,
    }


NEW_RULE = {"name": "", "priority": 100, "enabled": True, "action_type": "", "conditions": [], "match": "all",
            "risk_level": "medium", "required_approvals": 1, "approver_group": "reviewers", "escalation_group": None,
            "decision_ttl_seconds": 3600, "execution_window_seconds": 900, "editable_params": [],
            "masked_params": [], "trusts_declared": False}


@risk_admin_required
@require_http_methods(["GET", "POST"])
def rule_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """GET: the editor. POST: `rule_json` (the builder's rule) and `note`; one save_rule."""
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
        return render(request, "rules/edit.html", _editor_context(request, rule, existing=existing))

    note = _note(request)
    try:
        data = json.loads(request.POST.get("rule_json", ""))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        error = RuleValidationError("rule", "the rule did not arrive; is JavaScript on?")
        return render(request, "rules/edit.html", _editor_context(request, rule, existing=existing, error=error,
                                                                  note=note), status=422)
    if existing is not None and data.get("name") != existing:
        error = RuleValidationError("name", "a rule keeps its name; create a new rule and delete this one instead")
    elif existing is None and RiskRule.objects.filter(name=data.get("name")).exists():
        error = RuleValidationError("name", f"a rule named {data.get('name')!r} exists; edit it instead")
    else:
        error = None
    if error is None:
        try:
            saved = policy.save_rule(data, acting_user=request.user, note=note)
        except RuleValidationError as exc:
            error = exc
        else:
            messages.success(request, f"Rule {saved.name} saved as policy v{policy_history.versions().first().number}.")
            return redirect("rules:list")
    shown = {**rule, **{k: v for k, v in data.items() if k in RULE_KEYS}}
    return render(request, "rules/edit.html", _editor_context(request, shown, existing=existing, error=error,
                                                              note=note), status=422)


@risk_admin_required
@require_POST
def notification_settings(request: HttpRequest, name: str) -> HttpResponse:
    if not RiskRule.objects.filter(name=name).exists():
        raise Http404("No such rule.")

    def seconds(field: str) -> int | None:
        raw = request.POST.get(field, "").strip()
        if not raw:
            return None
        if not raw.isdigit():
            raise ValueError(f"{field}: a whole number of seconds")
        return int(raw)

    try:
        group_name = request.POST.get("escalation_group", "").strip()
        group = Group.objects.filter(name=group_name).first() if group_name else None
        if group_name and group is None:
            raise ValueError(f"escalation_group: no group named {group_name!r}")
        notifications.save_settings(
            name, acting_user=request.user,
            notify_on_arrival=request.POST.get("notify_on_arrival") == "1",
            remind_before_seconds=seconds("remind_before_seconds"),
            escalate_after_seconds=seconds("escalate_after_seconds"),
            escalation_group=group,
            max_extension_seconds=seconds("max_extension_seconds") or 0,
            webhook_url=request.POST.get("webhook_url", "").strip(),
        )
    except ValueError as exc:
        messages.error(request, f"Notification settings not saved: {exc}")
    else:
        messages.success(request, f"Notification settings of {name} saved.")
    return redirect("rules:edit", name=name)


# --- JSON: validate, dry-run, test --------------------------------------------------------------------


@risk_admin_required
@require_POST
@_json_endpoint
def validate(request: HttpRequest) -> JsonResponse:
    """``{"rule": {...}}`` → ``{"ok": true, "rule"}`` or 422 ``{"ok": false, "field", "message"}``."""
    result = editing.validate_rule(_json_body(request).get("rule"))
    if not result["ok"]:
        return _error("invalid_rule", result["message"], status=422, field=result["field"])
    return JsonResponse(result)


def _proposal(data: dict[str, Any]) -> list[dict[str, Any]]:
    if "rules" in data:
        if not isinstance(data["rules"], list):
            raise _BadInput("invalid_proposal", "'rules' must be a list of rules.", "rules")
        return data["rules"]
    if data.get("delete"):
        return dry_runs.propose_deletion(str(data["delete"]))
    if isinstance(data.get("rule"), dict):
        replaces = data.get("replaces")
        return dry_runs.propose_rule(data["rule"], replaces=replaces if isinstance(replaces, str) else None)
    raise _BadInput("invalid_proposal", "Send a rule, a whole rule set (rules) or a rule name to delete.")


@risk_admin_required
@require_POST
@_json_endpoint
def dry_run(request: HttpRequest) -> JsonResponse:
    """``{"rule": {...}, "replaces"?: name}``, ``{"rules": [...]}`` or ``{"delete": name}``,
    with ``limit`` (default 1,000) → the dry-run report."""
    data = _json_body(request)
    limit = data.get("limit", dry_runs.DEFAULT_SAMPLE)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= dry_runs.MAX_SAMPLE:
        raise _BadInput("invalid_limit", f"limit must be a whole number from 1 to {dry_runs.MAX_SAMPLE}.", "limit")
    report = dry_runs.dry_run(_proposal(data), limit=limit)
    return JsonResponse({"ok": True, **report.to_dict()})


@risk_admin_required
@require_POST
@_json_endpoint
def try_sample(request: HttpRequest) -> JsonResponse:
    """``{"rule"?: {...}, "replaces"?: name, "sample"?: {...}, "request_id"?: uuid}`` →
    which rule matched, the classification, and each of the rule's conditions."""
    data = _json_body(request)
    sample, shown = data.get("sample"), None
    if data.get("request_id"):
        try:
            found = editing.sample_from_request(str(data["request_id"]))
        except (ValueError, ValidationError):  # a malformed id is just "not found"
            found = None
        if found is None:
            raise _BadInput("not_found", "No such request.", "request_id")
        sample, shown = found
    if sample is None:
        raise _BadInput("invalid_sample", "Send a sample (JSON) or pick a recent request.", "sample")
    rule = data.get("rule")
    if rule is not None and not isinstance(rule, dict):
        raise _BadInput("invalid_rule", "'rule' must be an object.", "rule")
    replaces = data.get("replaces") if isinstance(data.get("replaces"), str) else None
    result = editing.try_rule(rule, sample, replaces=replaces)
    # A picked request's params are classified as stored but shown masked.
    return JsonResponse({"ok": True, **result.to_dict(), "sample": shown})


@risk_admin_required
@require_GET
def samples(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True, "requests": editing.recent_samples()})


# --- History and rollback -------------------------------------------------------------------------------


@risk_admin_required
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    page = Paginator(policy_history.versions(), 25).get_page(request.GET.get("page"))
    return render(request, "rules/history.html", {"page": page, "rows": policy_history.rows(page.object_list)})


@risk_admin_required
@require_GET
def version(request: HttpRequest, number: int) -> HttpResponse:
    detail = policy_history.version_detail(number)
    if detail is None:
        raise Http404("No such policy version.")
    rules = [{**rule, "conditions_json": json.dumps(rule["conditions"])} for rule in detail.rules]
    return render(request, "rules/version.html", {"detail": detail, "rules": rules})


@risk_admin_required
@require_POST
def restore(request: HttpRequest, number: int) -> HttpResponse:
    try:
        restored = policy_history.rollback(number, acting_user=request.user, note=_note(request))
    except RuleValidationError as exc:
        _flash_rule_error(request, exc)
        return redirect("rules:version", number=number)
    messages.success(request, f"Policy v{number} restored as v{restored.number}.")
    return redirect("rules:history")


# --- Metrics ------------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@risk_admin_required
@require_GET
def metrics_page(request: HttpRequest) -> HttpResponse:
    try:
        period = metrics.Period.from_query(request.GET)
    except ValueError as exc:
        messages.error(request, f"Showing the last {metrics.DEFAULT_PERIOD_DAYS} days: {exc}.")
        period = metrics.Period.last_days()
    tables = {key: metrics.outcome_table(key, period) for key in metrics.DIMENSIONS}
    reviewers = metrics.reviewer_table(period)
    series = metrics.time_series(period)
    days = [point.day.strftime("%m-%d") for point in series]
    timeline = charts.line_chart(days, [
        charts.Series("Requests", [p.volume for p in series], "s-volume"),
        charts.Series("Needed people", [p.needed_people for p in series], "s-people"),
        charts.Series("Auto-approved", [p.auto_approved for p in series], "s-auto"),
        charts.Series("Rejected", [p.rejected for p in series], "s-rejected"),
    ], title="Requests per day")
    approval_bars = charts.bar_chart(
        [charts.Bar(row.key, row.approval_rate, _pct(row.approval_rate)) for row in tables["rule"][:15]],
        title="Approval rate by rule (of requests that needed people)", maximum=1.0,
    )
    reviewer_bars = charts.bar_chart(
        [charts.Bar(row.key, row.median_seconds, _duration(row.median_seconds)) for row in reviewers[:15]],
        title="Median time to decide by reviewer", css_class="bar-b",
    )
    return render(request, "rules/metrics.html", {
        "period": period,
        "tables": [(key, metrics.DIMENSIONS[key][0], rows) for key, rows in tables.items()],
        "reviewers": reviewers,
        "timeline": timeline,
        "approval_bars": approval_bars,
        "reviewer_bars": reviewer_bars,
        "query": f"from={period.first_day.isoformat()}&to={period.last_day.isoformat()}",
    })


@risk_admin_required
@require_GET
def metrics_csv(request: HttpRequest, table: str) -> HttpResponse:
    if table not in (*metrics.DIMENSIONS, "reviewer", "daily"):
        raise Http404("No such table.")
    try:
        period = metrics.Period.from_query(request.GET)
    except ValueError as exc:
        return _error("invalid_period", str(exc))
    response = HttpResponse(metrics.table_csv(table, period), content_type="text/csv; charset=utf-8")
    filename = f"decision-metrics-{table}-{period.first_day.isoformat()}-{period.last_day.isoformat()}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --- The reviewer's deadline extension ------------------------------------------------------------------------


@login_required
@require_POST
def extend_deadline(request: HttpRequest, pk) -> HttpResponse:
    """A reviewer pushes decide_by back once, within the rule's limit (`seconds`, `reason`)."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    raw = request.POST.get("seconds", "")
    try:
        if not raw.isdigit():
            raise DomainError("extension_not_allowed", "Say by how many seconds to extend.", http_status=422)
        updated = services.extend_decision_deadline(pk, actor=services.Reviewer.from_request(request), seconds=int(raw),
                                                    reason=request.POST.get("reason", ""))
    except DomainError as exc:
        if wants_json:
            return _error(exc.code, exc.message, status=exc.http_status)
        messages.error(request, exc.message)
        return redirect("approvals:queue")
    message = f"Deadline extended to {updated.decide_by:%Y-%m-%d %H:%M} UTC."
    if wants_json:
        return JsonResponse({"ok": True, "message": message, "decide_by": updated.decide_by.isoformat()})
    messages.success(request, message)
    return redirect("approvals:queue")
