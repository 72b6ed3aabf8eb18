"""The reviewer's pages: the live queue, card fragments, decisions and history.

Views are thin: they parse input (filters: `approvals.filters`), read through
`approvals.web.queue_queries` (which uses `permissions.decidable_by`) and `cards`, and
decide only through the reviewer-decision adapter (`approvals.decide`), which the
JSON API shares.
Decision endpoints answer a plain form POST with a redirect and a message, and a
`fetch` from the page (Accept: application/json) with JSON: `{"ok": true,
"message": ...}` or `{"code": ..., "message": ...}` with the DomainError's status.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from controlplane.http.errors import CodedError
from controlplane.http.inputs import parse_json_text

from .. import decide, errors, services
from ..errors import DomainError
from ..filters import DECIDED_STATES, ApprovalRequestFilterSet, HistoryFilterSet
from ..permissions import decidable_by, with_view_grant_or_audit
from ..states import RiskLevel
from . import cards, queue_queries, request_page
from .batch_groups import sync_entries


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _filters(request: HttpRequest) -> ApprovalRequestFilterSet:
    return ApprovalRequestFilterSet(request.GET)


def _back_to_queue(request: HttpRequest) -> str:
    """Where a card's no-JavaScript form returns: the queue under the same filters."""
    query = request.GET.urlencode()
    return reverse("approvals:queue") + (f"?{query}" if query else "")


# --- Pages ----------------------------------------------------------------------------


def _order(request: HttpRequest) -> str:
    return queue_queries.order_of(request.GET.get("order"))


def _shown(request: HttpRequest) -> int:
    return queue_queries.window(request.GET.get("shown"))


def _page_of_cards(request: HttpRequest, filters: ApprovalRequestFilterSet) -> list[cards.Card]:
    page = queue_queries.queue_page(
        request.user, filters, order=_order(request), limit=_shown(request), related=cards.CARD_RELATIONS
    )
    return cards.build_cards(page, viewer=request.user)


def _with(query, **changes: str) -> str:
    """The page's query string with `changes` (an empty value drops the key)."""
    copy = query.copy()
    for key, value in changes.items():
        copy.pop(key, None)
        if value:
            copy[key] = value
    return copy.urlencode()


@login_required
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    """The queue of pending requests the reviewer may decide, in the chosen order
    (most urgent first by default), with counts for the filters in use."""
    filters = _filters(request)
    order = _order(request)
    counts = queue_queries.queue_counts(request.user, filters)
    shown = _page_of_cards(request, filters)
    return render(
        request,
        "approvals/queue.html",
        {
            "cards": shown,
            "entries": cards.group_batches(shown),
            "counts": counts,
            "filters": filters.in_use(),
            "order": order,
            "order_explained": queue_queries.ORDERS[order],
            "orders": [
                (name, _with(request.GET, order=name if name != "urgency" else "")) for name in queue_queries.ORDERS
            ],
            "risk_links": [
                (level, n, colour, _with(request.GET, risk=level)) for level, n, colour in counts["by_risk"]
            ],
            "expiring_link": _with(request.GET, expiring="1"),
            "shown_limit": _shown(request),
            "more_than_shown": queue_queries.more_than_shown(counts, _shown(request)),
            "show_more_link": _with(request.GET, shown=str(_shown(request) + queue_queries.QUEUE_LIMIT)),
            "page_size": queue_queries.QUEUE_LIMIT,
            "window_max": queue_queries.QUEUE_WINDOW,
            "risk_levels": [level for level in RiskLevel.values if level != RiskLevel.PROHIBITED],
            "query": request.GET.urlencode(),
            "next_url": _back_to_queue(request),
            "step_up_method": _step_up_method(request),
        },
    )


@login_required
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    """Decided requests the person may look at, with the queue's filters; each row opens its request page."""
    filters = HistoryFilterSet(request.GET)
    page = Paginator(request_page.history(request.user, filters), 50).get_page(request.GET.get("page"))
    request_page.annotate_rows(page.object_list)
    choices = request_page.history_choices(request.user)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "approvals/history.html",
        {
            "page": page,
            "filters": filters.in_use(),
            "counts": choices,  # the filter form reads `counts.agents` and `counts.action_types`
            "risk_levels": choices["risk_levels"],
            "outcomes": DECIDED_STATES,
            "query": query.urlencode(),
        },
    )


@login_required
@require_GET
def request_detail(request: HttpRequest, pk) -> HttpResponse:
    """One request's whole story: revisions and their diffs, every decision, the
    execution and the audit timeline. 404 for a request the person may not look at."""
    shown = request_page.request_page(request.user, pk)
    if shown is None:
        raise Http404("No such request.")
    return render(request, "approvals/request.html", {"page": shown, "card": shown.card})


@login_required
@require_POST
def reveal(request: HttpRequest, pk) -> JsonResponse:
    """The page's reveal of one masked param (JSON in, JSON out: `{"field", "value"}`).

    404 for a request the person may not look at; the service's refusals otherwise
    (403 `not_permitted` for one they may see but not decide, 422 `field_not_masked`)."""
    if not with_view_grant_or_audit(request.user).filter(pk=pk).exists():
        return errors.no_such_request().as_response()
    field = request.POST.get("field")
    if field is None and request.content_type == "application/json":
        try:
            body = parse_json_text(request.body.decode("utf-8", "replace"), field="body")
        except (ValueError, CodedError):
            body = None
        field = body.get("field") if isinstance(body, dict) else None
    try:
        revealed = services.reveal_field(pk, field, actor=services.Person.from_request(request))
    except DomainError as error:
        return JsonResponse(error.as_dict(), status=error.http_status)
    return JsonResponse(
        {
            "field": revealed.field,
            "value": revealed.value,
            "revision": revealed.revision,
            "edit_value": revealed.value
            if isinstance(revealed.value, str)
            else json.dumps(revealed.value, ensure_ascii=False),
        }
    )


@login_required
@require_GET
def queue_sync(request: HttpRequest) -> JsonResponse:
    """What the queue should show now, for the page's resync on (re)connect and after
    every push: `{"count", "by_risk": {level: n}, "expiring", "more", "shown", "cards": [{"id",
    "version", "sort", "group"?, "url"?}]}`: entries in the page's order (a batch
    group's entry, with the `url` of its fragment, before its members, which name it
    in `group`); counts for the page's filters (each exact up to
    queue_queries.COUNT_CAP, then the string "1,000+"); `more`: the page lists only the
    first `shown` (its window, ?shown=, whole pages of QUEUE_LIMIT). The page shows these counts as they come: it never adds or
    subtracts in the browser."""
    filters = _filters(request)
    counts = queue_queries.queue_counts(request.user, filters)
    shown = _page_of_cards(request, filters)
    return JsonResponse(
        {
            "count": counts["total"],
            "by_risk": {level: n for level, n, _ in counts["by_risk"]},
            "expiring": counts["expiring"],
            "more": queue_queries.more_than_shown(counts, _shown(request)),
            "shown": _shown(request),
            "cards": sync_entries(shown),
        }
    )


@login_required
@require_GET
def card_fragment(request: HttpRequest, pk) -> HttpResponse:
    """One card's HTML, if the request is in the viewer's queue under the page's filters.

    204 when it is not (decided, expired, filtered out, or not theirs): the page then
    removes the card. Never reveals whether a request it may not see exists.
    """
    match = queue_queries.queue(request.user, _filters(request)).filter(pk=pk)
    found = cards.build_cards(match, viewer=request.user)
    if not found:
        return HttpResponse(status=204)
    # The card, then its row in the triage list: one fetch keeps the two in step.
    response = render(
        request,
        "approvals/_card_fragment.html",
        {"card": found[0], "next_url": _back_to_queue(request), "step_up_method": _step_up_method(request)},
    )
    response["X-Card-Version"] = found[0].version
    response["X-Card-Sort"] = found[0].sort_key
    return response


@login_required
@require_GET
def batch_card(request: HttpRequest, pk) -> HttpResponse:
    """The batch group of request `pk` (its pane, then its header row), over the members
    in the viewer's queue under the page's filters; 204 when fewer than two are left
    (the page then drops the group and shows the one left as a plain row)."""
    queue = queue_queries.queue(request.user, _filters(request), order=_order(request))
    member = queue.filter(pk=pk).only("agent_id", "batch_id").first()
    if member is None or not member.batch_id:
        return HttpResponse(status=204)
    same = queue.filter(agent_id=member.agent_id, batch_id=member.batch_id)[: queue_queries.GROUP_LIMIT]
    groups = [entry for entry in cards.group_batches(cards.build_cards(same, viewer=request.user)) if entry.is_group]
    if not groups:
        return HttpResponse(status=204)
    response = render(
        request,
        "approvals/_group_fragment.html",
        {"group": groups[0], "next_url": _back_to_queue(request), "step_up_method": _step_up_method(request)},
    )
    response["X-Card-Version"] = groups[0].version
    return response


# --- Decisions ------------------------------------------------------------------------


def _back(request: HttpRequest) -> str:
    """Where the form came from: a path on this site, else the queue."""
    target = request.POST.get("next", "")
    # A path only: `redirect()` would read "0" or "queue" as a URL name (and fail).
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return reverse("approvals:queue")


def _outcome(request: HttpRequest, *, ok: bool, message: str, status: int = 200, **extra: Any) -> HttpResponse:
    if _wants_json(request):
        body = {"ok": True, "message": message, **extra} if ok else {"message": message, **extra}
        return JsonResponse(body, status=status)
    (messages.success if ok else messages.warning)(request, message)
    return HttpResponseRedirect(_back(request))


def _refused(request: HttpRequest, error: DomainError) -> HttpResponse:
    decide.end_session_if(request, error.code)  # this answer then carries the cleared cookie
    # "Already approved by bob." is news, not a failure: the loser of a race sees who won.
    return _outcome(
        request,
        ok=False,
        message=error.message,
        status=error.http_status,
        code=error.code,
        **({"details": error.details} if error.details else {}),
    )


def _decidable(request: HttpRequest, pk, *, full: bool = False):
    """The request if the reviewer may decide it; 404 otherwise (no existence leak).
    `full`: the whole row (an edit is read against its current params)."""
    scope = decidable_by(request.user).filter(pk=pk)
    found = (scope if full else scope.only("pk", "kind")).first()
    if found is None:
        raise Http404("No such request in your queue.")
    return found


def _step_up_method(request: HttpRequest) -> Callable[[], str]:
    """What the cards' step-up field asks of this reviewer, looked up only if a card shows one."""
    return cache(lambda: services.method_for(request.user))


def decision_answer(request: HttpRequest, pk, verdict: str) -> HttpResponse:
    """A card's decision (`verdict`: approve, reject, edit or respond), read and made by
    the one adapter (approvals.decide); the answer is its `Decided`, or the refusal."""
    target = _decidable(request, pk, full=verdict == decide.EDIT)
    try:
        decision = decide.read_decision(request.POST, target, verdict=verdict)
        decided = decide.decide(decision, actor=decide.reviewer(request, request.POST), user=request.user)
    except DomainError as error:
        return _refused(request, error)
    return _outcome(
        request,
        ok=True,
        message=decided.message,
        state=decided.request.state,
        **({"proposal": True} if decided.proposal else {}),
    )


@login_required
@require_POST
def approve(request: HttpRequest, pk) -> HttpResponse:
    return decision_answer(request, pk, decide.APPROVE)


@login_required
@require_POST
def reject(request: HttpRequest, pk) -> HttpResponse:
    return decision_answer(request, pk, decide.REJECT)


@login_required
@require_POST
def approve_with_edits(request: HttpRequest, pk) -> HttpResponse:
    return decision_answer(request, pk, decide.EDIT)


@login_required
@require_POST
def respond(request: HttpRequest, pk) -> HttpResponse:
    """The card's `respond`, one address for two answers that differ by kind: a
    suspension's typed answer (`resume_data`, JSON text from static/js/schema_form.js)
    or a reply in place of an action's tool (`message`: the tool never runs)."""
    return decision_answer(request, pk, decide.RESPOND)


@login_required
@require_POST
def decide_batch(request: HttpRequest) -> HttpResponse:
    """A batch group's "Approve all" / "Reject all": each member decided at the revision
    its row showed, with every guard of a single decision (`services.decide_batch`);
    one step-up proof covers the whole batch's digest. The page's fetch gets `{"ok",
    "message", "results": [{"id", "ok", "state"?, "code"?, "message"}]}`, a refusal per
    request (one not in the reviewer's queue reads as missing); a plain form POST,
    the queue again with the messages."""
    try:
        batch = decide.read_batch(request.POST)
        decided = decide.decide_batch(
            batch,
            actor=decide.reviewer(request, request.POST, covers=batch.confirmed()),
            scope=decidable_by(request.user),
        )
    except DomainError as error:  # the batch's own input (its form, its feedback's size): nothing was decided
        return _refused(request, error)
    results = [_batch_result(result) for result in decided.results]
    if decided.ended_the_session:
        logout(request)
    if not _wants_json(request):  # the no-script form: the queue again, with each refusal said
        for result in results:
            if not result["ok"]:
                messages.warning(request, f"{result['id']}: {result['message']}")
    return _outcome(request, ok=True, message=decided.message, results=results)


def _batch_result(result: decide.ItemResult) -> dict[str, Any]:
    if result.missing:
        return {
            "id": result.request_id,
            "ok": False,
            "code": errors.NOT_FOUND,
            "message": "No such request in your queue.",
        }
    if result.error is not None:
        return {"id": result.request_id, "ok": False, "code": result.error.code, "message": result.error.message}
    return {
        "id": result.request_id,
        "ok": True,
        "state": result.decided.request.state,
        "message": result.decided.message,
    }
