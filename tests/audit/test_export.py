"""GET /audit/export.csv and /audit/export.jsonl: every filter, hostile values,
round trips, and a manifest whose digests and signature match what was received."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from freezegun import freeze_time

from audit.chain import Actor, record
from audit.models import AuditEvent
from hitl_controlplane.manifest import signature_problem
from hitl_controlplane.verify import verify_export

from .conftest import SIGNING_KEY, SIGNING_KEY_ID
from .exporting import download, jsonl_rows

REFUND = SimpleNamespace(pk=uuid.UUID("6f1c1f52-4c7e-4d59-9d3a-1f2e3d4c5b6a"), agent_id=7)
MAIL = SimpleNamespace(pk=uuid.UUID("0b5c2a6e-1111-4d59-9d3a-000000000002"), agent_id=8)
HOSTILE = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", 'a,b "c"\nd']


@pytest.fixture
def export_story(alice, system) -> None:
    """Two requests on two days: a high-risk refund (agent 7) and a low-risk mail (agent 8)."""
    refund_bot, mail_bot = SimpleNamespace(pk=7, name="refund-bot"), SimpleNamespace(pk=8, name="mail-bot")
    with freeze_time("2026-03-01T10:00:00Z"):
        record("request.submitted", actor=Actor.for_agent(refund_bot), request=REFUND)
        record("request.queued", actor=system, request=REFUND, metadata={"risk_level": "high", "rule": "refunds"})
        record("decision.recorded", actor=Actor.for_user(alice), request=REFUND, metadata={"verdict": "approve"})
    with freeze_time("2026-03-02T10:00:00Z"):
        record("request.submitted", actor=Actor.for_agent(mail_bot), request=MAIL)
        record("request.auto_approved", actor=system, request=MAIL, metadata={"risk_level": "low", "rule": "read_low"})
        record("request.approved", actor=Actor.for_user(alice), request=REFUND)
        record("policy.changed", actor=Actor.for_user(alice), metadata={"note": "tightened"})


def exported_seqs(user, query: str) -> list[int]:
    response, body = download(user, f"/audit/export.jsonl?{query}")
    assert response.status_code == 200, body
    rows, _ = jsonl_rows(body)
    return [row["seq"] for row in rows]


# --- Filters ---------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query,expected",
    [
        ("", [1, 2, 3, 4, 5, 6, 7]),
        ("since=2026-03-02", [4, 5, 6, 7]),
        ("until=2026-03-02T00:00:00Z", [1, 2, 3]),
        ("since=2026-03-01T09:00:00%2B00:00&until=2026-03-01T11:00:00Z", [1, 2, 3]),
        ("verb=request.submitted", [1, 4]),
        ("actor=alice", [3, 6, 7]),
        ("actor_kind=agent", [1, 4]),
        ("agent=8", [4, 5]),
        (f"request={REFUND.pk}", [1, 2, 3, 6]),
        ("risk=high", [1, 2, 3, 6]),
        ("risk=low", [4, 5]),
        ("rule=read_low", [4, 5]),
        ("risk=high&rule=read_low", []),
        ("risk=critical", []),
        ("verb=request.approved&actor=alice&agent=7", [6]),
    ],
)
def test_every_filter_selects_exactly_its_events(export_story, auditor_ann, query, expected):
    assert exported_seqs(auditor_ann, query) == expected


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query,field",
    [
        ("since=yesterday", "since"),
        ("verb=request.nonsense", "verb"),
        ("agent=seven", "agent"),
        ("request=not-a-uuid", "request"),
        ("risk=spicy", "risk"),
        ("since=2026-03-02&until=2026-03-01", "until"),
        ("actor_kind=robot", "actor_kind"),
        ("agent=-7", "agent"),
        ("agent=99999999999999999999", "agent"),
    ],
)
def test_a_bad_filter_is_a_json_400_naming_the_field(export_story, auditor_ann, query, field):
    response, body = download(auditor_ann, f"/audit/export.csv?{query}")
    assert response.status_code == 400
    error = json.loads(body)
    assert (error["code"], error["details"]) == ("invalid_filter", {"field": field})
    assert error["message"]


# --- Manifest: digests and signature match what was received --------------------------------


@pytest.mark.django_db
def test_the_jsonl_trailer_manifest_matches_the_rows_received(export_story, auditor_ann):
    response, body = download(auditor_ann, "/audit/export.jsonl?actor=alice")
    rows, manifest = jsonl_rows(body)
    seqs = [row["seq"] for row in rows]
    assert manifest["row_count"] == len(rows) == 3
    assert manifest["seq_digest"] == hashlib.sha256("".join(f"{s}\n" for s in seqs).encode()).hexdigest()
    assert manifest["hash_digest"] == hashlib.sha256("".join(f"{r['hash']}\n" for r in rows).encode()).hexdigest()
    assert manifest["filters"] == {"actor": "alice"}
    assert manifest["chain_head"] == {"seq": 7, "hash": AuditEvent.objects.get(seq=7).hash}
    assert manifest["exported_by"] == {"kind": "user", "id": str(auditor_ann.pk), "label": "ann"}
    assert manifest["export_id"] == response["X-Audit-Export-Id"]
    assert signature_problem(manifest, SIGNING_KEY) is None
    assert manifest["signature"] == {**manifest["signature"], "alg": "Ed25519", "key_id": SIGNING_KEY_ID}


@pytest.mark.django_db
def test_jsonl_rows_round_trip_to_the_stored_canonical_text(export_story, auditor_ann):
    _, body = download(auditor_ann, "/audit/export.jsonl")
    rows, _ = jsonl_rows(body)
    stored = {e.seq: e for e in AuditEvent.objects.all()}
    for row in rows:
        event = stored[row["seq"]]
        assert (row["prev_hash"], row["hash"], row["canonical"]) == (event.prev_hash, event.hash, event.canonical)
        assert row["event"] == json.loads(event.canonical)


@pytest.mark.django_db
def test_every_export_is_itself_an_audit_event(export_story, auditor_ann):
    response, _ = download(auditor_ann, "/audit/export.csv?verb=request.submitted")
    event = AuditEvent.objects.order_by("-seq").first()
    assert (event.verb, event.actor_label, event.actor_kind) == ("audit.exported", "ann", "user")
    assert event.metadata["filters"] == {"verb": "request.submitted"}
    assert event.metadata["row_count"] == 2
    assert event.metadata["export_id"] == response["X-Audit-Export-Id"]
    assert event.metadata["seq_digest"] == event.metadata["manifest"]["seq_digest"]


@pytest.mark.django_db
def test_the_csv_sidecar_is_fetched_by_the_link_header_and_verifies(export_story, auditor_ann, tmp_path):
    response, body = download(auditor_ann, "/audit/export.csv?agent=7")
    link = response["Link"]
    assert link.startswith("</audit/export.csv.manifest?export_id=") and 'rel="describedby"' in link
    manifest_response, manifest_body = download(auditor_ann, link[1 : link.index(">")])
    assert manifest_response.status_code == 200
    (tmp_path / "x.csv").write_bytes(body)
    verdict = verify_export(tmp_path / "x.csv", manifest=json.loads(manifest_body), key=SIGNING_KEY)
    assert verdict.ok, verdict.message


@pytest.mark.django_db
def test_an_unknown_export_id_has_no_manifest(auditor_ann):
    response, body = download(auditor_ann, f"/audit/export.csv.manifest?export_id={uuid.uuid4()}")
    assert response.status_code == 404
    assert json.loads(body)["code"] == "export_not_found"


@pytest.mark.django_db
def test_an_export_stops_at_the_head_it_started_from(export_story, auditor_ann):
    """Rows appended while an export streams are left to the next export, so its manifest holds."""
    from asgiref.sync import async_to_sync

    from audit.export import begin_export, stream_export
    from audit.filters import AuditEventFilterSet

    plan = begin_export(AuditEventFilterSet.from_query({}), "jsonl", actor=Actor.for_user(auditor_ann))
    record("policy.changed", actor=Actor.system(), metadata={"late": True})

    async def collect() -> str:
        return "".join([chunk async for chunk in stream_export(plan, chunk_rows=2)])

    rows, manifest = jsonl_rows(async_to_sync(collect)().encode())
    assert [row["seq"] for row in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert manifest["chain_head"]["seq"] == 7


# --- CSV safety -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_hostile_csv_values_are_neutralized_and_still_verify(auditor_ann, tmp_path):
    for value in HOSTILE:
        record("policy.changed", actor=Actor.system(label=value), metadata={"note": value})
    response, body = download(auditor_ann, "/audit/export.csv")
    assert response["Content-Type"].startswith("text/csv")
    records = list(csv.reader(io.StringIO(body.decode("utf-8"), newline="")))
    header, rows = records[0], records[1:]
    label = header.index("actor_label")
    assert [row[label] for row in rows] == [
        '\'=HYPERLINK("http://x")',
        "'+1+1",
        "'-2+3",
        "'@SUM(A1)",
        "'\tTAB",
        "'\rCR",
        'a,b "c"\nd',
    ]
    for row in rows:
        assert len(row) == len(header), "commas, quotes and newlines stay inside their cell"
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row)
    _, manifest = download(auditor_ann, response["Link"][1 : response["Link"].index(">")])
    (tmp_path / "hostile.csv").write_bytes(body)
    verdict = verify_export(tmp_path / "hostile.csv", manifest=json.loads(manifest), key=SIGNING_KEY)
    assert verdict.ok, verdict.message


# --- The management command ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_audit_export_command_writes_a_verifiable_file_with_a_progress_bar(export_story, tmp_path, fmt):
    out, err = io.StringIO(), io.StringIO()
    path = tmp_path / f"export.{fmt}"
    call_command("audit_export", "--format", fmt, "--out", str(path), "--since", "2026-03-02", stdout=out, stderr=err)
    assert "100% 4/4 rows" in err.getvalue()
    manifest = None
    if fmt == "csv":
        manifest = json.loads((tmp_path / "export.csv.manifest.json").read_text())
    verdict = verify_export(path, manifest=manifest, key=SIGNING_KEY)
    assert verdict.ok, verdict.message
    assert verdict.rows == 4
    exported = AuditEvent.objects.order_by("-seq").first()
    assert (exported.verb, exported.actor_label) == ("audit.exported", "audit_export")
    assert exported.metadata["filters"] == {"since": "2026-03-02T00:00:00.000000Z"}


def test_filters_are_written_into_the_manifest_as_stable_text():
    from audit.filters import AuditEventFilterSet

    filters = AuditEventFilterSet.from_query({"since": "2026-03-02T12:00:00+02:00", "agent": "7", "verb": ""})
    assert filters.as_text() == {"since": "2026-03-02T10:00:00.000000Z", "agent": "7"}
    assert filters.form.cleaned_data["since"] == datetime(2026, 3, 2, 10, tzinfo=UTC)


def test_the_risk_filter_offers_the_approvals_risk_levels():
    """The audit app repeats them (it imports no other app); this keeps the copy honest."""
    from approvals.states import RiskLevel
    from audit.filters import RISK_LEVELS

    assert list(RISK_LEVELS) == list(RiskLevel.values)


# --- Streaming --------------------------------------------------------------------------------


def _stream(plan, chunk_rows: int) -> str:
    from asgiref.sync import async_to_sync

    from audit.export import stream_export

    async def collect() -> str:
        return "".join([chunk async for chunk in stream_export(plan, chunk_rows=chunk_rows)])

    return async_to_sync(collect)()


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_streamed_export_equals_the_command_export_row_for_row(export_story, fmt):
    """The view (async, chunks of 2) and the command (sync, chunks of 3) cut the rows
    differently; the rows, their order and the digests must come out the same."""
    from audit.export import begin_export, iter_export
    from audit.filters import AuditEventFilterSet

    streamed = begin_export(AuditEventFilterSet.from_query({}), fmt, actor=Actor.system("test"))
    written = begin_export(AuditEventFilterSet.from_query({}), fmt, actor=Actor.system("test"))  # same head: seq 7
    streamed_text = _stream(streamed, chunk_rows=2)
    written_text = "".join(text for text, _ in iter_export(written, chunk_rows=3))
    if fmt == "jsonl":  # the trailers differ (export ids); the rows must not
        streamed_text, written_text = (text[: text.rindex('{"manifest"')] for text in (streamed_text, written_text))
    assert streamed_text == written_text
    digests = ("row_count", "first_seq", "last_seq", "seq_digest", "hash_digest")
    assert [streamed.manifest[k] for k in digests] == [written.manifest[k] for k in digests]
    assert streamed.manifest["row_count"] == 7


@pytest.mark.django_db
def test_a_client_leaving_mid_export_ends_the_stream_without_an_exported_event(export_story, auditor_ann):
    from asgiref.sync import async_to_sync

    from audit.export import begin_export, stream_export
    from audit.filters import AuditEventFilterSet

    plan = begin_export(AuditEventFilterSet.from_query({}), "jsonl", actor=Actor.for_user(auditor_ann))

    async def first_chunk_then_leave() -> str:
        stream = stream_export(plan, chunk_rows=2)
        first = await stream.__anext__()
        await stream.aclose()  # what Django does when the client disconnects
        return first

    first = async_to_sync(first_chunk_then_leave)()
    assert [json.loads(line)["seq"] for line in first.splitlines()] == [1, 2]
    assert plan.manifest is None
    assert not AuditEvent.objects.filter(verb="audit.exported").exists()


def test_a_chunk_renders_and_digests_as_row_by_row_and_reads_back_as_hashed():
    """The export renders a chunk at a time; its lines and digests must be the one-row
    functions' (the format docs/audit.md publishes), and the verifier must recover each
    hashed text from them, whatever the text holds."""
    from hitl_controlplane.canonical import canonical_bytes, chain_hash
    from hitl_controlplane.manifest import ExportDigests, jsonl_hashed_text, jsonl_line, jsonl_lines

    documents = [
        {"seq": 1, "note": 'quote " backslash \\ newline \n'},
        {"seq": 5, "note": "ünïcode ✓ \u2028"},
        {"seq": 9},
    ]
    rows, prev = [], "0" * 64
    for document in documents:
        canonical = canonical_bytes(document).decode("utf-8")
        rows.append(
            (document["seq"], prev, chain_hash(prev, canonical.encode()), canonical, "0123abcd0123abcd", "c2ln")
        )
        prev = rows[-1][2]
    text = jsonl_lines(rows)
    assert text == "".join(jsonl_line(*row) for row in rows)
    lines = [line + "\n" for line in text.split("\n")[:-1]]  # not splitlines(): U+2028 is no line end here
    for line, (_, _, _, canonical, _, _) in zip(lines, rows, strict=True):
        assert jsonl_hashed_text(line, json.loads(line)) == canonical
    chunked, one_by_one = ExportDigests(), ExportDigests()
    chunked.add_many(rows[:2])
    chunked.add_many(rows[2:])
    for seq, _, row_hash, *_ in rows:
        one_by_one.add(seq, row_hash)
    assert chunked.as_manifest_fields() == one_by_one.as_manifest_fields()


@pytest.mark.django_db
def test_an_export_that_fails_after_it_started_ends_its_body_without_a_manifest(export_story, auditor_ann, monkeypatch):
    """The headers are sent: a failure at the end must close the body, not leave the
    download hanging (it did, when the worker's audit key had moved on); the file
    then verifies as incomplete, never as whole."""
    from asgiref.sync import async_to_sync

    from audit import export
    from audit.filters import AuditEventFilterSet

    def refuse(plan):
        raise RuntimeError("the chain refused the audit.exported event")

    monkeypatch.setattr(export, "finish_export", refuse)
    plan = export.begin_export(AuditEventFilterSet.from_query({}), "jsonl", actor=Actor.for_user(auditor_ann))

    async def collect() -> str:
        return "".join([chunk async for chunk in export.stream_export(plan, chunk_rows=2)])

    text = async_to_sync(collect)()
    assert text.count("\n") == 7 and '"manifest"' not in text
    assert not AuditEvent.objects.filter(verb="audit.exported").exists()
