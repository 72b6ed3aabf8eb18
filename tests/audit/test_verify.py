"""`manage.py audit_verify` finds any edit, names the first bad seq, and exits 1."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from audit.chain import Actor, head, record, verify_chain
from audit.db import maintenance
from audit.models import AuditEvent

TABLE = AuditEvent._meta.db_table
PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def five_events(alice, refund_request, system) -> None:
    record("request.submitted", actor=Actor.for_user(alice), request=refund_request)
    record("request.queued", actor=system, request=refund_request, metadata={"rule": "refunds"})
    record("decision.recorded", actor=Actor.for_user(alice), request=refund_request, metadata={"amount": "12.30"})
    record("request.approved", actor=system, request=refund_request)
    record("request.succeeded", actor=system, request=refund_request)


def tamper(sql: str, params: list) -> None:
    with maintenance(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def verify(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("audit_verify", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_a_clean_chain_verifies(five_events):
    seq, digest = head()
    out, err = verify("--no-record")
    assert out.splitlines()[0] == f"OK: 5 events verified, head seq 5 hash {digest}"
    assert "5/5" in err


@pytest.mark.django_db
def test_verification_is_itself_recorded(five_events):
    verify()
    event = AuditEvent.objects.last()
    assert (event.seq, event.verb, event.actor_label) == (6, "audit.verified", "audit_verify")
    assert event.metadata["checked"] == 5
    assert verify_chain().ok


@pytest.mark.django_db
def test_an_edited_canonical_is_found(five_events):
    tamper(f"UPDATE {TABLE} SET canonical = REPLACE(canonical, 'refunds', 'payroll') WHERE seq = %s", [2])
    out = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("audit_verify", stdout=out, stderr=io.StringIO())
    assert raised.value.returncode == 1
    assert out.getvalue().startswith("BROKEN at seq 2: stored hash")
    assert AuditEvent.objects.last().verb == "audit.chain_broken"


@pytest.mark.django_db
def test_an_edited_metadata_column_is_found_even_with_the_canonical_untouched(five_events):
    tamper(f"UPDATE {TABLE} SET metadata = %s WHERE seq = %s", ['{"amount": "1200.30"}', 3])
    result = verify_chain()
    assert (result.ok, result.bad_seq, result.checked) == (False, 3, 2)
    assert "columns differ" in result.reason


@pytest.mark.django_db
def test_a_deleted_row_is_found_as_a_gap(five_events):
    tamper(f"DELETE FROM {TABLE} WHERE seq = %s", [4])
    with pytest.raises(CommandError):
        verify("--no-record")
    result = verify_chain()
    assert (result.bad_seq, result.reason) == (4, "seq gap: expected seq 4, found 5")


@pytest.mark.django_db
def test_a_consistently_rehashed_row_no_longer_matches_its_signature(five_events):
    from hitl_controlplane.canonical import chain_hash

    row = AuditEvent.objects.get(seq=2)
    forged = row.canonical.replace("refunds", "payroll")
    tamper(
        f"UPDATE {TABLE} SET canonical = %s, metadata = %s, hash = %s WHERE seq = 2",
        [forged, '{"rule": "payroll"}', chain_hash(row.prev_hash, forged.encode())],
    )
    result = verify_chain()
    assert (result.ok, result.bad_seq) == (False, 2)
    assert "signature does not match" in result.reason


@pytest.mark.django_db
def test_since_seq_verifies_from_the_stored_anchor(five_events):
    tamper(f"UPDATE {TABLE} SET canonical = REPLACE(canonical, 'refunds', 'payroll') WHERE seq = %s", [2])
    out, _ = verify("--since-seq", "3", "--no-record")
    assert out.startswith("OK: 3 events verified, head seq 5")
    with pytest.raises(CommandError):
        verify("--since-seq", "2", "--no-record")


@pytest.mark.django_db
def test_progress_is_reported_per_chunk_and_at_the_end(five_events, monkeypatch):
    from audit import walk

    monkeypatch.setattr(walk, "VERIFY_CHUNK_SIZE", 2)
    calls: list[tuple[int, int]] = []
    assert verify_chain(progress=lambda done, total: calls.append((done, total))).ok
    assert calls == [(2, 5), (4, 5), (5, 5)]


@pytest.mark.django_db(transaction=True)
def test_the_command_exits_1_from_the_shell(five_events, settings):
    env = dict(os.environ, DATABASE_URL=_database_url(), AUDIT_SIGNING_KEY=settings.AUDIT_SIGNING_KEY)
    ok = subprocess.run(
        [sys.executable, "manage.py", "audit_verify", "--no-record"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("OK: 5 events verified")

    tamper(f"UPDATE {TABLE} SET actor_label = %s WHERE seq = %s", ["mallory", 1])
    broken = subprocess.run(
        [sys.executable, "manage.py", "audit_verify", "--no-record"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert broken.returncode == 1
    assert broken.stdout.startswith("BROKEN at seq 1: columns differ")


def _database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
