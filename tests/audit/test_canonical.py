"""The canonical form is pinned so a plain Python verifier can reproduce every hash."""

from __future__ import annotations

import decimal
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from freezegun import freeze_time

from audit.chain import Actor, record
from audit.models import AuditEvent
from hitl_controlplane.canonical import (
    GENESIS_HASH,
    canonical_bytes,
    chain_hash,
    format_timestamp,
    verify_rows,
)


def test_keys_are_sorted_and_separators_compact():
    assert canonical_bytes({"b": 1, "a": {"d": [1, 2], "c": None}}) == b'{"a":{"c":null,"d":[1,2]},"b":1}'


def test_non_ascii_is_kept_as_utf8():
    assert canonical_bytes({"name": "Zoë ✓"}) == '{"name":"Zoë ✓"}'.encode()


@pytest.mark.parametrize(
    "value",
    [1.5, {"amount": 10.0}, [0.1], decimal.Decimal("1.10"), datetime(2026, 1, 1), uuid.uuid4(), {1: "x"}],
    ids=["float", "nested float", "float in list", "decimal", "datetime", "uuid", "int key"],
)
def test_values_without_a_pinned_form_are_refused(value):
    with pytest.raises(TypeError):
        canonical_bytes(value)


def test_decimals_travel_as_strings():
    assert canonical_bytes({"amount": "10.50"}) == b'{"amount":"10.50"}'


def test_timestamps_are_utc_with_microseconds_and_z():
    plus_two = timezone(timedelta(hours=2))
    assert format_timestamp(datetime(2026, 11, 29, 20, 0, tzinfo=plus_two)) == "2026-11-29T18:00:00.000000Z"
    assert format_timestamp(datetime(2026, 11, 29, 18, 0, 0, 42, tzinfo=UTC)) == "2026-11-29T18:00:00.000042Z"


def test_naive_timestamps_are_refused():
    with pytest.raises(ValueError):
        format_timestamp(datetime(2026, 11, 29, 18, 0))


def test_chain_hash_is_sha256_of_prev_hash_then_canonical():
    canonical = b'{"seq":1}'
    assert chain_hash(GENESIS_HASH, canonical) == hashlib.sha256(b"0" * 64 + canonical).hexdigest()


@pytest.mark.django_db
@freeze_time("2026-11-29 18:00:00")
def test_a_stored_row_holds_the_exact_canonical_document(alice, refund_request):
    record(
        "request.approved",
        actor=Actor.for_user(alice),
        request=refund_request,
        metadata={"to": "approved", "from": "pending_approval", "amount": "12.30", "note": "très bien"},
    )
    event = AuditEvent.objects.get()
    assert (
        event.canonical
        == (  # noqa: UP031
            '{"actor":{"id":"%s","kind":"user","label":"alice"},"agent_id":7,'
            '"metadata":{"amount":"12.30","from":"pending_approval","note":"très bien","to":"approved"},'
            '"occurred_at":"2026-11-29T18:00:00.000000Z",'
            '"request_id":"6f1c1f52-4c7e-4d59-9d3a-1f2e3d4c5b6a","seq":1,"verb":"request.approved"}'
        )
        % alice.pk
    )


@pytest.mark.django_db
def test_plain_python_recomputes_a_stored_hash(alice, refund_request):
    record("request.submitted", actor=Actor.for_user(alice), request=refund_request)
    record("request.queued", actor=Actor.system(), request=refund_request, metadata={"rule": "mail-external"})
    for event in AuditEvent.objects.all():
        # Only hashlib and json: what an auditor's script would do with an export.
        recomputed = hashlib.sha256(event.prev_hash.encode("ascii") + event.canonical.encode("utf-8")).hexdigest()
        assert recomputed == event.hash
        assert json.loads(event.canonical)["seq"] == event.seq


def _chain(count: int) -> list[dict]:
    rows, prev = [], GENESIS_HASH
    for seq in range(1, count + 1):
        canonical = canonical_bytes({"seq": seq, "verb": "request.submitted"}).decode()
        digest = chain_hash(prev, canonical.encode())
        rows.append({"seq": seq, "prev_hash": prev, "hash": digest, "canonical": canonical})
        prev = digest
    return rows


def test_verify_rows_accepts_an_intact_chain():
    result = verify_rows(_chain(3))
    assert (result.ok, result.checked, result.head_seq) == (True, 3, 3)


def test_verify_rows_reports_a_gap_at_the_missing_seq():
    rows = _chain(4)
    del rows[2]
    result = verify_rows(rows)
    assert (result.ok, result.bad_seq) == (False, 3)
    assert "gap" in result.reason


def test_verify_rows_reports_an_edited_canonical():
    rows = _chain(3)
    rows[1]["canonical"] = rows[1]["canonical"].replace("submitted", "approved")
    result = verify_rows(rows)
    assert (result.ok, result.bad_seq, result.checked) == (False, 2, 1)
    assert "hash" in result.reason


def test_verify_rows_reports_a_broken_link():
    rows = _chain(3)
    rows[2]["prev_hash"] = "f" * 64
    result = verify_rows(rows)
    assert (result.ok, result.bad_seq) == (False, 3)
    assert "prev_hash" in result.reason


def test_canonical_module_imports_nothing_from_django():
    import subprocess
    import sys
    from pathlib import Path

    import hitl_controlplane

    project_root = Path(hitl_controlplane.__file__).resolve().parent.parent
    code = "import sys, hitl_controlplane.canonical; sys.exit(any(m == 'django' or m.startswith('django.') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=project_root, check=False).returncode == 0
