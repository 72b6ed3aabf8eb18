"""Auditors' pages and exports. Read-only: every view answers GET/HEAD only.

Pages need `audit.view_auditevent`; exports and manifests also need
`audit.export_auditevent` (both granted to the `auditors` group). Export
endpoints answer errors as JSON with a stable `code` and a human `message`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_safe

from hitl_controlplane.canonical import chain_hash

from . import error_codes, subjects, tree, witnesses
from .chain import Actor
from .checkpoint import latest_checkpoint
from .export import FORMATS, begin_export, exported_manifest, stream_export
from .filters import RISK_LEVELS, AuditEventFilterSet, FilterError
from .models import ActorKind, AuditEvent, ChainVerification
from .signing import signer
from .vocabulary import all_verbs, describe, is_registered, phase_of

VIEW_PERMISSION = "audit.view_auditevent"
EXPORT_PERMISSION = "audit.export_auditevent"
PAGE_SIZE = 50
_LIST_FIELDS = ("seq", "occurred_at", "actor_kind", "actor_id", "actor_label", "verb", "request_id", "agent_id")


def _auditor_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Sign-in required, then the view permission (403 otherwise), GET/HEAD only."""
    return require_safe(login_required(permission_required(VIEW_PERMISSION, raise_exception=True)(view)))


def _error(code: str, message: str, **details: Any) -> JsonResponse:
    """The project's one error shape, `{"code", "message", "details"?}`, with the code's status."""
    body = {"code": code, "message": message, **({"details": details} if details else {})}
    return JsonResponse(body, status=error_codes.status(code))  # the site's registry's status


# --- Pages ------------------------------------------------------------------------------


@_auditor_page
def audit_log(request: HttpRequest) -> HttpResponse:
    """The filterable log, newest first, paged by seq (keyset: `before` / `after`, never OFFSET)."""
    status = 200
    try:
        filters = AuditEventFilterSet.from_query(request.GET)
        error = None
    except FilterError as exc:
        filters, error, status = AuditEventFilterSet.from_query({}), exc, 400
    events, older, newer = _page(filters, request.GET.get("before", ""), request.GET.get("after", ""))
    query = filters.as_text()
    context = {
        "events": _with_agent_names(events),
        "filters": query,
        "filter_error": error,
        "verbs": all_verbs(),
        "actor_kinds": ActorKind.choices,
        "risk_levels": RISK_LEVELS,
        "older_url": f"?{urlencode({**query, 'before': str(older)})}" if older else "",
        "newer_url": f"?{urlencode({**query, 'after': str(newer)})}" if newer else "",
        "newest_url": f"?{urlencode(query)}" if (older or newer) else "",
        "export_query": urlencode(query),
        "can_export": request.user.has_perm(EXPORT_PERMISSION),
        "status": _chain_status(),
        "recent_exports": _recent_exports(),
    }
    return render(request, "audit/log.html", context, status=status)


def _seq_or_blank(raw: str) -> str:
    """`raw` when it is a seq a bigint holds in ASCII digits, else "" (no 500 for "²" or 40 digits)."""
    return raw if raw.isascii() and raw.isdigit() and len(raw) <= 18 else ""


def _page(filters: AuditEventFilterSet, before: str, after: str) -> tuple[list[dict[str, Any]], int | None, int | None]:
    """One page of events, newest first, and the seqs to page older/newer from (None at an end)."""
    before, after = _seq_or_blank(before), _seq_or_blank(after)
    queryset = filters.filter_queryset(AuditEvent.objects.all()).values(*_LIST_FIELDS)
    if after.isdigit():
        rows = list(queryset.filter(seq__gt=int(after)).order_by("seq")[: PAGE_SIZE + 1])
        has_newer = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE][::-1]
        return rows, (rows[-1]["seq"] if rows else None), (rows[0]["seq"] if has_newer and rows else None)
    if before.isdigit():
        queryset = queryset.filter(seq__lt=int(before))
    rows = list(queryset.order_by("-seq")[: PAGE_SIZE + 1])
    has_older = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    older = rows[-1]["seq"] if has_older else None
    newer = rows[0]["seq"] if before.isdigit() and rows else None
    return rows, older, newer


def agent_names(events: list[dict[str, Any]]) -> dict[int, str]:
    """The names of the agents `events` mention, by id, in at most one query.

    The audit app imports no other app, so the current names come from the lookup the
    agents app registered (audit.subjects); an agent that is gone (or never had a row
    here) keeps the label it acted under on these rows, and otherwise shows as "agent #id"."""
    ids = {event["agent_id"] for event in events if event.get("agent_id") is not None}
    if not ids:
        return {}
    names = {agent_id: f"agent #{agent_id}" for agent_id in ids}
    for event in events:  # the label an agent acted under, copied onto its own rows
        if event.get("actor_kind") == ActorKind.AGENT and event.get("actor_id") == str(event["agent_id"]):
            names[event["agent_id"]] = event["actor_label"]
    names.update(subjects.agent_names(ids))
    return names


def _with_agent_names(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = agent_names(events)
    for event in events:
        event["agent_name"] = names.get(event["agent_id"]) if event.get("agent_id") is not None else None
    return events


def _chain_status() -> dict[str, Any]:
    """The status panel: the last verification run, the last checkpoint files, the witnessed checkpoint."""
    runs = list(ChainVerification.objects.order_by("-finished_at", "-pk")[:1])
    last = runs[0] if runs else None
    return {
        "last": last,
        "checkpoint": latest_checkpoint(),
        "signing_key": signer().current,
        "witnessing": witnesses.witness_panel(),
    }


def _recent_exports(limit: int = 5) -> list[dict[str, Any]]:
    rows = (
        AuditEvent.objects.filter(verb="audit.exported")
        .order_by("-seq")
        .values("seq", "occurred_at", "actor_label", "metadata")[:limit]
    )
    return [
        {
            "seq": row["seq"],
            "occurred_at": row["occurred_at"],
            "actor_label": row["actor_label"],
            "export_id": row["metadata"].get("export_id", ""),
            "format": row["metadata"].get("format", ""),
            "row_count": row["metadata"].get("row_count"),
            "filters": row["metadata"].get("filters", {}),
        }
        for row in rows
    ]


@_auditor_page
def event_detail(request: HttpRequest, seq: int) -> HttpResponse:
    """One event: every column, its canonical text, and whether its hash recomputes."""
    event = AuditEvent.objects.filter(seq=seq).first()
    if event is None:
        raise Http404("No audit event with that seq.")
    recomputed = chain_hash(event.prev_hash, event.canonical.encode("utf-8"))
    context = {
        "event": event,
        "description": describe(event.verb) if is_registered(event.verb) else "",
        "metadata_json": json.dumps(event.metadata, indent=2, sort_keys=True, ensure_ascii=False),
        "hash_recomputes": recomputed == event.hash,
        "recomputed": recomputed,
        "phase": phase_of(event.verb, ""),
        "tree": tree.event_proof(event.seq, event.hash),
        "agent_name": agent_names(
            [
                {
                    "agent_id": event.agent_id,
                    "actor_kind": event.actor_kind,
                    "actor_id": event.actor_id,
                    "actor_label": event.actor_label,
                }
            ]
        ).get(event.agent_id)
        if event.agent_id is not None
        else None,
    }
    return render(request, "audit/event.html", context)


@_auditor_page
def request_timeline(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Every event about one request in seq order: submission, classification, decisions, execution."""
    events = list(AuditEvent.objects.filter(request_id=request_id).order_by("seq").values(*_LIST_FIELDS, "metadata"))
    subject = subjects.request_summary(request_id)  # what the approvals app registered
    if not events and subject is None:
        raise Http404("No audit events for that request.")
    for event in events:
        event["phase"] = phase_of(event["verb"])
    context = {"request_id": request_id, "subject": subject, "events": _with_agent_names(events)}
    return render(request, "audit/timeline.html", context)


# --- Exports ----------------------------------------------------------------------------


async def _export_refusal(request: HttpRequest) -> JsonResponse | None:
    if request.method not in ("GET", "HEAD"):
        return _error("method_not_allowed", "Audit exports are read-only: use GET.")
    user = await request.auser()
    if not user.is_authenticated:
        return _error("not_authenticated", "Sign in as an auditor to export the audit log.")
    if not await sync_to_async(user.has_perm)(EXPORT_PERMISSION):
        return _error("permission_denied", "Only auditors may export the audit log.")
    return None


async def export(request: HttpRequest, fmt: str) -> HttpResponseBase:
    """Stream the filtered log as CSV or JSON Lines (see audit.export for the format)."""
    refusal = await _export_refusal(request)
    if refusal is not None:
        return refusal
    try:
        filters = AuditEventFilterSet.from_query(request.GET)
    except FilterError as exc:
        return _error(exc.code, exc.message, field=exc.field)
    user = await request.auser()
    plan = await sync_to_async(begin_export)(filters, fmt, actor=Actor.for_user(user))
    response = StreamingHttpResponse(stream_export(plan), content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{plan.filename}"'
    response["Cache-Control"] = "no-store"
    response["X-Audit-Export-Id"] = plan.export_id
    manifest_url = f"{reverse('audit:export_manifest')}?{urlencode({'export_id': plan.export_id})}"
    response["Link"] = f'<{manifest_url}>; rel="describedby"; type="application/json"'
    return response


async def export_csv(request: HttpRequest) -> HttpResponseBase:
    return await export(request, "csv")


async def export_jsonl(request: HttpRequest) -> HttpResponseBase:
    return await export(request, "jsonl")


async def export_manifest(request: HttpRequest) -> HttpResponse:
    """The signed manifest of a finished export (the CSV sidecar), by `export_id`."""
    refusal = await _export_refusal(request)
    if refusal is not None:
        return refusal
    export_id = request.GET.get("export_id", "")
    manifest = await sync_to_async(exported_manifest)(export_id)
    if manifest is None:
        return _error(
            "export_not_found",
            "No finished export has that export_id (the manifest exists once the download has completed).",
        )
    response = JsonResponse(manifest, json_dumps_params={"sort_keys": True, "indent": 2})
    response["Content-Disposition"] = f'attachment; filename="audit-export-{export_id[:8]}.manifest.json"'
    response["Cache-Control"] = "no-store"
    return response
