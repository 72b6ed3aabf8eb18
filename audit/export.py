"""Streaming audit exports (CSV and JSON Lines) with a signed manifest.

An export is planned (`begin_export`: filters, format, who, and the chain head
at that moment), streamed in keyset chunks (`seq > last ORDER BY seq LIMIT n`,
never OFFSET, never the whole result in memory), and finished (`finish_export`:
the manifest is built from digests accumulated while streaming, signed with
the server's Ed25519 audit key (audit.signing), and recorded as an `audit.exported` event
whose metadata holds the whole signed manifest).

Rows past the head read at the start are not exported, so an export is a
consistent snapshot even while events keep arriving (rows never change, so no
long transaction is needed for that).

The JSONL manifest is the file's last line. The CSV manifest is a sidecar: the
response names the export in `X-Audit-Export-Id` and a `Link: <...manifest...>;
rel="describedby"` header, and `GET /audit/export.csv.manifest?export_id=...`
returns the signed manifest from the `audit.exported` event once the download
finished (see docs/audit.md).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from hitl_controlplane.canonical import format_timestamp
from hitl_controlplane.manifest import CSV_COLUMNS, MANIFEST_TYPE, ExportDigests, csv_cells, jsonl_lines, sign

from .chain import Actor, head, record
from .export_evidence import evidence_fields
from .filters import AuditEventFilterSet
from .models import AuditEvent
from .signing import signer

__all__ = [
    "EXPORT_CHUNK_BYTES",
    "FORMATS",
    "Chunk",
    "ExportPlan",
    "begin_export",
    "exported_manifest",
    "finish_export",
    "iter_export",
    "next_chunk",
    "stream_export",
]

logger = logging.getLogger(__name__)

# A keyset query asks for about this much canonical text (~1,000 rows of the usual
# ~480 bytes). A chunk is sized by bytes, not rows: rows run from ~300 bytes to tens
# of KB, and it is memory that must stay flat. Bigger chunks bought nothing
# measurable (tests/perf/bench_audit_export: 2,200-row chunks rendered no faster
# per row and raised the server's peak RSS by ~12 MiB, docs/perf-audit-export.md).
EXPORT_CHUNK_BYTES = 1 << 19
_FIRST_CHUNK_ROWS = 1000
_MAX_CHUNK_ROWS = 20_000
FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}
_ROW_FIELDS = ("seq", "prev_hash", "hash", "canonical", "key_id", "signature")
Row = tuple[int, str, str, str, str, str]


@dataclass
class ExportPlan:
    """One export in progress. `digests` fills up as rows are rendered."""

    export_id: str
    fmt: str
    filters: AuditEventFilterSet  # validated (from_query)
    actor: Actor
    head_seq: int
    head_hash: str
    started_at: datetime
    digests: ExportDigests = field(default_factory=ExportDigests)
    manifest: dict[str, Any] | None = None
    matching_sql: tuple[str, tuple[Any, ...]] | None = field(default=None, repr=False)

    @property
    def filename(self) -> str:
        return f"audit-export-{self.started_at:%Y%m%dT%H%M%SZ}-{self.export_id[:8]}.{self.fmt}"


def begin_export(filters: AuditEventFilterSet, fmt: str, *, actor: Actor) -> ExportPlan:
    """Plan an export of the rows matching `filters` up to the current chain head."""
    if fmt not in FORMATS:
        raise ValueError(f"export format must be one of {', '.join(FORMATS)}")
    head_seq, head_hash = head()
    return ExportPlan(
        export_id=str(uuid.uuid4()),
        fmt=fmt,
        filters=filters,
        actor=actor,
        head_seq=head_seq,
        head_hash=head_hash,
        started_at=timezone.now(),
    )


def _matching_rows(plan: ExportPlan) -> QuerySet[AuditEvent, tuple[Any, ...]]:
    """Every row the export holds: the filters, up to the head read at the start."""
    matching: QuerySet[AuditEvent] = plan.filters.filter_queryset(AuditEvent.objects.filter(seq__lte=plan.head_seq))
    return matching.order_by().values_list(*_ROW_FIELDS)


def fetch_chunk(plan: ExportPlan, after_seq: int, limit: int) -> list[Row]:
    """The next `limit` matching rows after `after_seq`, as (seq, prev_hash, hash, canonical, key_id, signature).

    The ORM compiles the filtered query once per export and each chunk wraps it
    in its keyset bounds (`seq > last ORDER BY seq LIMIT n`, an index range scan
    on seq): compiling it again for every chunk cost ~0.4 ms a chunk, a tenth
    of the server's CPU for an export (tests/perf/bench_audit_export,
    docs/perf-audit-export.md). A plain cursor reads the rows: these columns need
    none of the ORM's per-row work (row iterators, converters), which was about a
    third of the export's time.
    """
    if plan.matching_sql is None:
        plan.matching_sql = _matching_rows(plan).query.sql_with_params()
    sql, params = plan.matching_sql
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq, prev_hash, hash, canonical, key_id, signature FROM ({sql}) AS matching"
            " WHERE seq > %s ORDER BY seq LIMIT %s",
            (*params, after_seq, limit),
        )
        rows: list[Row] = cursor.fetchall()
        return rows


def _limit_to_fill(rows: list[Row]) -> int:
    """How many more rows of the size of `rows` make about EXPORT_CHUNK_BYTES of canonical text."""
    per_row = sum([len(row[3]) for row in rows]) // len(rows) + 1
    return max(1, min(_MAX_CHUNK_ROWS, EXPORT_CHUNK_BYTES // per_row))


def header(plan: ExportPlan) -> str:
    """What comes before the rows: the CSV header line, nothing for JSONL."""
    if plan.fmt != "csv":
        return ""
    return _csv_text([list(CSV_COLUMNS)])


def render_rows(plan: ExportPlan, rows: list[Row]) -> str:
    """Render one chunk of rows in Python and add them to the plan's digests.

    CSV cells come from the canonical document (the text that was hashed), not
    from the other columns, so the export says exactly what the chain attests.
    """
    plan.digests.add_many(rows)
    if plan.fmt == "jsonl":
        return jsonl_lines(rows)
    return _csv_text(
        [
            csv_cells(json.loads(canonical), prev_hash, row_hash, canonical, key_id, signature)
            for seq, prev_hash, row_hash, canonical, key_id, signature in rows
        ]
    )


def _csv_text(records: list[list[str]]) -> str:
    buffer = io.StringIO()
    # QUOTE_MINIMAL quotes any cell holding a comma, quote or newline; CRLF per RFC 4180.
    csv.writer(buffer, lineterminator="\r\n").writerows(records)
    return buffer.getvalue()


def finish_export(plan: ExportPlan) -> dict[str, Any]:
    """Sign the manifest for the rows rendered so far and record the export as an audit event."""
    manifest = sign(
        {
            "type": MANIFEST_TYPE,
            "export_id": plan.export_id,
            "format": plan.fmt,
            "filters": plan.filters.as_text(),
            **plan.digests.as_manifest_fields(),
            "chain_head": {"seq": plan.head_seq, "hash": plan.head_hash},
            # The newest checkpoint at the head and one range proof tying the rows to its tree
            # (audit.export_evidence): O(log n) stored hashes, nothing per row.
            **evidence_fields(plan.head_seq, plan.digests),
            "exported_at": format_timestamp(plan.started_at),
            "exported_by": {"kind": str(plan.actor.kind), "id": plan.actor.id, "label": plan.actor.label},
        },
        signer().current,
    )
    record(
        "audit.exported",
        actor=plan.actor,
        metadata={
            "export_id": plan.export_id,
            "format": plan.fmt,
            "filters": manifest["filters"],
            "row_count": manifest["row_count"],
            "seq_digest": manifest["seq_digest"],
            "manifest": manifest,
        },
    )
    plan.manifest = manifest
    return manifest


def trailer(plan: ExportPlan) -> str:
    """What comes after the rows: the JSONL manifest line, nothing for CSV (its manifest is a sidecar)."""
    if plan.fmt != "jsonl" or plan.manifest is None:
        return ""
    return json.dumps({"manifest": plan.manifest}, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Chunk:
    """One rendered chunk: its text, how many rows it holds, the last seq, and how
    many rows to ask for next."""

    text: str
    rows: int
    last_seq: int
    next_limit: int


def next_chunk(plan: ExportPlan, after_seq: int, limit: int, *, sized: bool = True) -> Chunk:
    """Fetch and render up to `limit` rows after `after_seq`; no rows means the export is done.

    `sized` picks the next limit so that a chunk holds ~EXPORT_CHUNK_BYTES; without
    it every chunk asks for `limit` rows (tests cut small chunks that way). One call
    per chunk, so the view crosses into Django's database thread once per chunk, not
    once for the query and once for the rendering.
    """
    rows = fetch_chunk(plan, after_seq, limit)
    if not rows:
        return Chunk("", 0, after_seq, limit)
    next_limit = _limit_to_fill(rows) if sized else limit
    return Chunk(render_rows(plan, rows), len(rows), rows[-1][0], next_limit)


async def stream_export(plan: ExportPlan, *, chunk_rows: int | None = None) -> AsyncIterator[str]:
    """Yield the export as text chunks, holding one chunk of rows in memory at a time.

    Database work runs in Django's sync thread via sync_to_async, one short query
    per chunk; no connection or transaction is held between chunks. The chunk just
    yielded is written to the socket by the event loop while the next one is
    fetched and rendered in that thread. `chunk_rows` fixes the rows per chunk;
    by default a chunk holds ~EXPORT_CHUNK_BYTES.
    """
    fetch = sync_to_async(next_chunk)
    text = header(plan)
    if text:
        yield text
    try:
        chunk = await fetch(plan, 0, chunk_rows or _FIRST_CHUNK_ROWS, sized=chunk_rows is None)
        while chunk.rows:
            yield chunk.text
            chunk = await fetch(plan, chunk.last_seq, chunk.next_limit, sized=chunk_rows is None)
        await sync_to_async(finish_export)(plan)
    except Exception:
        # The headers are gone: end the body instead of leaving the client waiting on a
        # stream that will never finish. Without its manifest the file verifies as incomplete.
        logger.exception("audit export %s failed after it started; the file ends without its manifest", plan.export_id)
        return
    text = trailer(plan)
    if text:
        yield text


def iter_export(plan: ExportPlan, *, chunk_rows: int | None = None) -> Iterator[tuple[str, int]]:
    """The synchronous twin of `stream_export` (for `manage.py audit_export`).

    Yields (text, rows in this chunk) so a caller can show progress.
    """
    text = header(plan)
    if text:
        yield text, 0
    chunk = next_chunk(plan, 0, chunk_rows or _FIRST_CHUNK_ROWS, sized=chunk_rows is None)
    while chunk.rows:
        yield chunk.text, chunk.rows
        chunk = next_chunk(plan, chunk.last_seq, chunk.next_limit, sized=chunk_rows is None)
    finish_export(plan)
    text = trailer(plan)
    if text:
        yield text, 0


def count_rows(plan: ExportPlan) -> int:
    """How many rows the export will hold (one COUNT; for progress bars only)."""
    matching: QuerySet[AuditEvent] = plan.filters.filter_queryset(AuditEvent.objects.filter(seq__lte=plan.head_seq))
    return matching.count()


def exported_manifest(export_id: str) -> dict[str, Any] | None:
    """The signed manifest of a finished export, read from its `audit.exported` event."""
    try:
        uuid.UUID(export_id)
    except ValueError:
        return None
    metadata = (
        AuditEvent.objects.filter(verb="audit.exported", metadata__export_id=export_id)
        .values_list("metadata", flat=True)
        .first()
    )
    return None if metadata is None else metadata.get("manifest")
