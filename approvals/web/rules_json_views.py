"""The rule editor's JSON endpoints (risk-admins only): validate a rule, the paths its conditions
may read, a dry run over recent requests, and a rule tried on one sample. `rules_views` holds
the editor's pages.

They answer ``{"ok": true, ...}`` or the one error shape with a 4xx status (`rules_http`),
never a 500 for bad input.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from controlplane.http.codes import NOT_FOUND

from .. import policy, services
from ..execution.executors import params_by_action_type
from ..people import Person
from ..policy import authority as policy_authority
from ..policy.tuning import dry_run as dry_runs
from ..policy.tuning import editing
from ..policy.tuning import paths as rule_paths
from .rules_http import (
    INVALID_LIMIT,
    INVALID_PROPOSAL,
    INVALID_RULE,
    INVALID_SAMPLE,
    BadInput,
    json_body,
    json_endpoint,
    json_error,
    risk_admin_required,
    with_request_links,
)


def path_catalogue(action_type: Any) -> rule_paths.PathCatalogue:
    """The paths known for `action_type` (the condition builder's suggestions, here and on the editor page)."""
    return rule_paths.catalogue_for(action_type, executor_params=params_by_action_type(settings.EXECUTORS))


@risk_admin_required
@require_POST
@json_endpoint
def validate(request: HttpRequest) -> JsonResponse:
    """``{"rule": {...}}`` → ``{"ok": true, "rule"}`` or 422 ``{"ok": false, "field", "message"}``."""
    result = editing.validate_rule(json_body(request).get("rule"))
    if not result["ok"]:
        return json_error(INVALID_RULE, result["message"], field=result["field"])
    return JsonResponse(result)


@risk_admin_required
@require_POST
@json_endpoint
def paths(request: HttpRequest) -> JsonResponse:
    """``{"rule": {...}}`` → the paths known for its action type (the builder's
    suggestions) and ``warnings``: ``[{"field", "message"}]`` for each condition path
    nothing provides. Warnings never stop a save (`approvals.policy.tuning.paths`)."""
    rule = json_body(request).get("rule")
    if not isinstance(rule, dict):
        raise BadInput(INVALID_RULE, "'rule' must be an object.", "rule")
    catalogue = path_catalogue(rule.get("action_type"))
    return JsonResponse(
        {"ok": True, **catalogue.to_dict(), "warnings": rule_paths.path_warnings(rule.get("conditions"), catalogue)}
    )


def _proposal(data: dict[str, Any]) -> list[dict[str, Any]]:
    if "rules" in data:
        if not isinstance(data["rules"], list):
            raise BadInput(INVALID_PROPOSAL, "'rules' must be a list of rules.", "rules")
        return data["rules"]
    if data.get("delete"):
        return dry_runs.propose_deletion(str(data["delete"]))
    if isinstance(data.get("rule"), dict):
        replaces = data.get("replaces")
        return dry_runs.propose_rule(data["rule"], replaces=replaces if isinstance(replaces, str) else None)
    raise BadInput(INVALID_PROPOSAL, "Send a rule, a whole rule set (rules) or a rule name to delete.")


@risk_admin_required
@require_POST
@json_endpoint
def dry_run(request: HttpRequest) -> JsonResponse:
    """``{"rule": {...}, "replaces"?: name}``, ``{"rules": [...]}`` or ``{"delete": name}``,
    with ``limit`` (default 1,000) → the dry-run report, and ``four_eyes``: whether
    saving it would apply at once or wait for a second risk-admin (and why)."""
    data = json_body(request)
    limit = data.get("limit", dry_runs.DEFAULT_SAMPLE)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= dry_runs.MAX_SAMPLE:
        raise BadInput(INVALID_LIMIT, f"limit must be a whole number from 1 to {dry_runs.MAX_SAMPLE}.", "limit")
    proposed = _proposal(data)
    report = dry_runs.dry_run(proposed, limit=limit).to_dict()
    # Each row opens the request it would affect, where the risk-admin may open it.
    report["changes"] = with_request_links(request.user, report["changes"])
    current = policy.current_policy()
    waits = (
        policy_authority.waits_because(
            current.compiled.to_dicts(),
            current.destructive_verbs,
            proposed,
            current.destructive_verbs,
            user=request.user,
        )
        if settings.POLICY_FOUR_EYES
        else None
    )
    return JsonResponse({"ok": True, **report, "four_eyes": {"on": settings.POLICY_FOUR_EYES, "waits_because": waits}})


@risk_admin_required
@require_POST
@json_endpoint
def try_sample(request: HttpRequest) -> JsonResponse:
    """``{"rule"?: {...}, "replaces"?: name, "sample"?: {...}, "request_id"?: uuid}`` →
    which rule matched, the classification, and each of the rule's conditions.

    On a stored request its masked params (its own classification's) are read blind
    and shown masked; a rule under test whose conditions read one by value is an
    oracle for it, so it runs on the real value only for someone who may reveal it on
    that request while it is pending, audited (`services.allow_masked_probe`: 403
    `masked_probe_refused` otherwise)."""
    data = json_body(request)
    sample, shown, reveal = data.get("sample"), None, False
    masked: frozenset[str] = frozenset()
    rule = data.get("rule")
    if rule is not None and not isinstance(rule, dict):
        raise BadInput(INVALID_RULE, "'rule' must be an object.", "rule")
    if data.get("request_id"):
        try:
            found = editing.sample_from_request(str(data["request_id"]))
        except (ValueError, ValidationError):  # a malformed id is just "not found"
            found = None
        if found is None:
            raise BadInput(NOT_FOUND, "No such request.", "request_id")
        sample, shown, masked = found.sample, found.shown, found.masked
        probes = editing.masked_reads(rule, found)
        if probes:
            services.allow_masked_probe(found.request_id, probes, actor=Person.from_request(request))
            reveal = True
    if sample is None:
        raise BadInput(INVALID_SAMPLE, "Send a sample (JSON) or pick a recent request.", "sample")
    replaces = data.get("replaces") if isinstance(data.get("replaces"), str) else None
    result = editing.try_rule(rule, sample, replaces=replaces, masked=masked, reveal=reveal)
    return JsonResponse({"ok": True, **result.to_dict(), "sample": shown})


@risk_admin_required
@require_GET
def samples(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True, "requests": editing.recent_samples()})
