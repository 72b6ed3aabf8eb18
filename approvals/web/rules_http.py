"""HTTP helpers the rule-tuning views share: who may enter (risk-admins), JSON bodies
and JSON errors, and saying what a policy change did (applied, or waiting).

JSON endpoints answer ``{"ok": true, ...}``, or the one error shape ``{"code", "message",
"details"?: {"field"}}`` with the code's registered 4xx status, never a 500 for bad input.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse

from controlplane.http.codes import MALFORMED_BODY, REQUEST_TOO_LARGE, register
from controlplane.http.errors import CodedError, json_error
from controlplane.http.inputs import parse_json_text

from ..errors import NOT_PERMITTED
from ..models import PolicyProposal, PolicyVersion
from ..permissions import with_view_grant_or_audit
from ..policy import is_risk_admin
from ..policy.rules.conditions import RuleValidationError
from ..policy.tuning.proposal_review import waits_because

__all__ = [
    "BadInput",
    "flash_outcome",
    "flash_refusal",
    "json_body",
    "json_endpoint",
    "json_error",
    "INVALID_RULE",
    "note_from",
    "outcome_message",
    "redirect_after",
    "request_url",
    "risk_admin_required",
    "wants_json",
]

MAX_JSON_BODY = 1_000_000


INVALID_RULE = register("invalid_rule", 422, "A rule (or the rule set) is invalid; `details.field` names where.")
INVALID_PROPOSAL = register("invalid_proposal", 400, "Send a rule, a whole rule set or a rule name to delete.")
INVALID_LIMIT = register("invalid_limit", 400, "The dry-run sample size is out of range.")
INVALID_SAMPLE = register("invalid_sample", 400, "The sample to test a rule on is missing or malformed.")


def wants_json(request: HttpRequest) -> bool:
    return request.path.endswith(".json") or "application/json" in request.headers.get("Accept", "")


def risk_admin_required(view: Callable) -> Callable:
    """Anonymous: to the login page. Signed in but not a risk admin: 403 (JSON for
    .json/.csv endpoints and fetches, a page otherwise). The services check again."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not is_risk_admin(request.user):
            if wants_json(request):
                return json_error(NOT_PERMITTED, "Only risk admins may tune rules.")
            return render(request, "rules/forbidden.html", status=403)
        return view(request, *args, **kwargs)

    return wrapper


class BadInput(CodedError):
    """Input a JSON endpoint cannot use; `field` names where, when one field is to blame."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        if field:
            super().__init__(code, message, field=field)
        else:
            super().__init__(code, message)


def json_body(request: HttpRequest) -> dict[str, Any]:
    if len(request.body) > MAX_JSON_BODY:
        raise BadInput(REQUEST_TOO_LARGE, "The request body is too large.")
    try:
        data = parse_json_text(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise BadInput(MALFORMED_BODY, "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise BadInput(MALFORMED_BODY, "The request body must be a JSON object.")
    return data


def json_endpoint(view: Callable) -> Callable:
    """Turn input errors and refusals into JSON 4xx answers."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except RuleValidationError as exc:
            return json_error(INVALID_RULE, exc.message, field=exc.field)
        except CodedError as exc:  # bad input and the policy's refusals
            return JsonResponse(exc.as_dict(), status=exc.http_status)

    return wrapper


def request_url(pk: Any) -> str:
    """The page of one request, for dry-run rows. The request page (`approvals:request`,
    /requests/<id>/) comes from the history work; until its URL is wired the plain path
    is the one it will have."""
    try:
        return reverse("approvals:request", args=[pk])
    except NoReverseMatch:
        return f"/requests/{pk}/"


def with_request_links(user: Any, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dry-run rows with ``url`` set only where `user` may open the request (the request
    page's own guard, `with_view_grant_or_audit`); the others keep their details and get
    ``url: null``, never a link to a 404. One query for all the rows."""
    ids = [change["request_id"] for change in changes if change.get("request_id")]
    visible = {str(pk) for pk in with_view_grant_or_audit(user).filter(pk__in=ids).values_list("pk", flat=True)}
    return [
        {**change, "url": request_url(change["request_id"]) if str(change.get("request_id")) in visible else None}
        for change in changes
    ]


def note_from(request: HttpRequest) -> str:
    return request.POST.get("note", "").strip()


# --- Saying what a change did --------------------------------------------------------------------


def outcome_message(outcome: PolicyVersion | PolicyProposal) -> str:
    """ "Applied as version N (stricter only)." or "Waiting for a second risk-admin: <why>"."""
    if isinstance(outcome, PolicyProposal):
        return f"Waiting for a second risk-admin: {waits_because(outcome) or 'it is not provably stricter'}."
    if settings.POLICY_FOUR_EYES and outcome.approved_by_id is None:
        return f"Applied as version {outcome.number} (stricter only)."
    return f"Applied as version {outcome.number}."


def flash_outcome(request: HttpRequest, outcome: PolicyVersion | PolicyProposal, prefix: str = "") -> None:
    text = f"{prefix} {outcome_message(outcome)}".strip()
    (messages.info if isinstance(outcome, PolicyProposal) else messages.success)(request, text)


def redirect_after(outcome: PolicyVersion | PolicyProposal) -> HttpResponse:
    """A waiting change goes to its proposal page (diff, dry-run); an applied one to the list."""
    if isinstance(outcome, PolicyProposal):
        return redirect("rules:proposal", pk=outcome.pk)
    return redirect("rules:list")


def flash_refusal(request: HttpRequest, exc: RuleValidationError | CodedError) -> None:
    if isinstance(exc, RuleValidationError):
        messages.error(request, f"Nothing was saved: {exc.field}: {exc.message}")
    else:
        messages.error(request, f"Nothing was saved: {exc.message}")
