"""Policy history, rollback, and four eyes on policy: the proposal page where a
second risk-admin approves or rejects a waiting change and its author withdraws it.

Thin: every decision is `approvals.policy.approve_proposal` / `reject_proposal`,
which check the risk-admin, the second person and the base version under the lock.
Decisions answer JSON (the one error shape ``{"code", "message", "details"?}`` with the refusal's
status) when the client asks for it, else a redirect with a flash message.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from .. import policy
from ..models import PolicyProposal
from ..people import Person
from ..policy import PolicyError
from ..policy.rules.conditions import RuleValidationError
from ..policy.tuning import history as policy_history
from ..policy.tuning import proposal_review
from .rules_http import (
    INVALID_RULE,
    flash_outcome,
    flash_refusal,
    json_error,
    note_from,
    redirect_after,
    risk_admin_required,
    wants_json,
    with_request_links,
)

RECENT_PROPOSALS = 10


# --- History and rollback -------------------------------------------------------------------------------


@risk_admin_required
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    page = Paginator(policy_history.versions(), 25).get_page(request.GET.get("page"))
    recent = PolicyProposal.objects.order_by("-created_at").only(
        "id", "created_at", "proposed_by_label", "note", "status", "decided_by_label"
    )[:RECENT_PROPOSALS]
    return render(
        request,
        "rules/history.html",
        {
            "page": page,
            "rows": policy_history.rows(page.object_list),
            "proposals": recent,
        },
    )


@risk_admin_required
@require_GET
def version(request: HttpRequest, number: int) -> HttpResponse:
    detail = policy_history.version_detail(number)
    if detail is None:
        raise Http404("No such policy version.")
    rules = [
        {**rule, "conditions_text": proposal_review.conditions_text(rule["conditions"], rule.get("match", "all"))}
        for rule in detail.rules
    ]
    return render(request, "rules/version.html", {"detail": detail, "rules": rules})


@risk_admin_required
@require_POST
def restore(request: HttpRequest, number: int) -> HttpResponse:
    try:
        outcome = policy_history.rollback(number, actor=Person.from_request(request), note=note_from(request))
    except (RuleValidationError, PolicyError) as exc:
        flash_refusal(request, exc)
        return redirect("rules:version", number=number)
    flash_outcome(request, outcome, f"Restoring v{number}:")
    return redirect_after(outcome) if isinstance(outcome, PolicyProposal) else redirect("rules:history")


# --- Proposals ---------------------------------------------------------------------------------------


@risk_admin_required
@require_GET
def proposal(request: HttpRequest, pk: int) -> HttpResponse:
    detail = proposal_review.proposal_detail(pk)
    if detail is None:
        raise Http404("No such policy proposal.")
    mine = detail.proposal.proposed_by_id == request.user.pk
    changed = with_request_links(request.user, detail.dry_run_changes)
    return render(
        request,
        "rules/proposal.html",
        {"detail": detail, "p": detail.proposal, "mine": mine, "dry_run_changes": changed},
    )


def _refused(request: HttpRequest, exc: PolicyError | RuleValidationError, pk: int) -> HttpResponse:
    if wants_json(request):
        if isinstance(exc, RuleValidationError):
            return json_error(INVALID_RULE, exc.message, field=exc.field)
        return JsonResponse(exc.as_dict(), status=exc.http_status)
    flash_refusal(request, exc)
    return redirect("rules:proposal", pk=pk)


@risk_admin_required
@require_POST
def approve(request: HttpRequest, pk: int) -> HttpResponse:
    """A second risk-admin applies the proposal (`note` optional)."""
    try:
        applied = policy.approve_proposal(pk, actor=Person.from_request(request), note=note_from(request))
    except (PolicyError, RuleValidationError) as exc:
        return _refused(request, exc, pk)
    message = f"Approved: applied as version {applied.number}."
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message, "version": applied.number})
    messages.success(request, message)
    return redirect("rules:list")


@risk_admin_required
@require_POST
def reject(request: HttpRequest, pk: int) -> HttpResponse:
    """Another risk-admin rejects (a `note` saying why is required); the author withdraws."""
    try:
        closed = policy.reject_proposal(pk, actor=Person.from_request(request), note=note_from(request))
    except (PolicyError, RuleValidationError) as exc:
        return _refused(request, exc, pk)
    message = f"Proposal {closed.pk} {closed.get_status_display().lower()}: nothing was applied."
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message, "status": closed.status})
    messages.success(request, message)
    return redirect("rules:list")
