"""`python -m audit.verify`: an auditor checks an export without trusting the server.

It accepts a clean export (in process and on the command line, importing no Django), and
rejects, naming the first bad seq, one byte changed, a row removed, two rows swapped, a
rehashed row and a CSV column that disagrees with the canonical text.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitl_controlplane.ed25519 import public_key_text
from hitl_controlplane.manifest import jsonl_hashed_text, jsonl_line
from hitl_controlplane.verify import verify_export

from .conftest import SIGNING_KEY
from .exporting import export_to, manifest_path
from .verifier_story import PROJECT_ROOT, lines_of, run_verifier, verify


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_clean_unfiltered_export_verifies(eight_events, tmp_path, fmt):
    path = tmp_path / f"export.{fmt}"
    export_to(path, fmt)
    ok, message, _ = verify(path, manifest=json.loads(manifest_path(path).read_text()) if fmt == "csv" else None)
    assert ok, message
    assert message.startswith("OK: 8 rows verified (unfiltered chain seq 1-8 links to the head)")
    assert "manifest signature valid" in message


@pytest.mark.django_db
def test_the_command_line_prints_one_verdict_and_exits_0_or_1(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    key_file = tmp_path / "server.pub"
    key_file.write_text(public_key_text(SIGNING_KEY[0]) + "  # the server's audit key\n")

    run = run_verifier
    good = run(str(path), "--public-key-file", str(key_file))
    assert (good.returncode, good.stdout.count("\n")) == (0, 1)
    assert good.stdout.startswith("OK: 8 rows verified")
    lines = lines_of(path)
    path.write_text("".join(lines[:2] + lines[3:]), encoding="utf-8")
    bad = run(str(path), "--public-key", public_key_text(SIGNING_KEY[0]))
    assert bad.returncode == 1
    assert bad.stdout.startswith("FAILED at seq 3: ")


def test_importing_the_verifier_does_not_import_django():
    code = (
        "import sys, audit.verify, hitl_controlplane.verify, hitl_controlplane.manifest, hitl_controlplane.canonical\n"
        "loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "assert not loaded, loaded\n"
        "import audit; assert not hasattr(audit, 'default_app_config')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.django_db
def test_one_byte_changed_is_rejected_at_its_seq(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    lines[5] = lines[5].replace("succeeded", "succeedeD", 1)  # seq 6, request.succeeded
    path.write_text("".join(lines), encoding="utf-8")
    ok, message, bad_seq = verify(path)
    assert not ok and bad_seq == 6, message


@pytest.mark.django_db
def test_a_removed_row_is_rejected_at_the_missing_seq(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    path.write_text("".join(lines[:3] + lines[4:]), encoding="utf-8")
    ok, message, bad_seq = verify(path)
    assert (ok, bad_seq) == (False, 4), message
    assert "expected seq 4, found 5" in message


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_two_swapped_rows_are_rejected_at_the_first(eight_events, tmp_path, fmt):
    path = tmp_path / f"export.{fmt}"
    export_to(path, fmt)
    if fmt == "jsonl":
        lines = lines_of(path)
        lines[2], lines[3] = lines[3], lines[2]
        path.write_text("".join(lines), encoding="utf-8")
    else:
        import csv
        import io

        with path.open(newline="", encoding="utf-8") as handle:
            records = list(csv.reader(handle))
        records[3], records[4] = records[4], records[3]  # header is records[0]: seqs 3 and 4
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerows(records)
        path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    manifest = json.loads(manifest_path(path).read_text()) if fmt == "csv" else None
    ok, message, bad_seq = verify(path, manifest=manifest)
    assert (ok, bad_seq) == (False, 3), message


@pytest.mark.django_db
def test_a_rehashed_row_fails_its_signature_and_breaks_the_next_link(eight_events, tmp_path):
    """Editing a row and recomputing its hash: its signature no longer holds, and (for a
    verifier without the public key) the next row's prev_hash no longer links."""
    from hitl_controlplane.canonical import chain_hash

    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    row = json.loads(lines[2])
    canonical = jsonl_hashed_text(lines[2], row).replace('"approve"', '"reject"')
    lines[2] = jsonl_line(
        row["seq"],
        row["prev_hash"],
        chain_hash(row["prev_hash"], canonical.encode()),
        canonical,
        row["key_id"],
        row["signature"],
    )
    path.write_text("".join(lines), encoding="utf-8")
    ok, message, bad_seq = verify(path)
    assert (ok, bad_seq) == (False, 3), message
    assert "signature does not match" in message
    unkeyed = verify_export(path)
    assert (unkeyed.ok, unkeyed.bad_seq) == (False, 4), unkeyed.message
    assert "prev_hash" in unkeyed.message


@pytest.mark.django_db
@pytest.mark.parametrize("column,value", [(4, "alice2"), (5, "request.rejected"), (8, '{"verdict":"reject"}')])
def test_a_csv_column_that_disagrees_with_the_canonical_text_is_rejected(eight_events, tmp_path, column, value):
    import csv
    import io

    path = tmp_path / "export.csv"
    export_to(path, "csv")
    with path.open(newline="", encoding="utf-8") as handle:
        records = list(csv.reader(handle))
    records[3][column] = value  # seq 3, the decision
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(records)
    path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    ok, message, bad_seq = verify(path, manifest=json.loads(manifest_path(path).read_text()))
    assert (ok, bad_seq) == (False, 3), message
    assert "differs from the canonical text" in message


@pytest.mark.django_db
def test_any_single_byte_change_is_rejected(eight_events):
    with tempfile.TemporaryDirectory() as directory:
        original = Path(directory) / "export.jsonl"
        export_to(original)
        data = original.read_bytes()

        @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(position=st.integers(0, len(data) - 1), byte=st.integers(0, 255))
        def check(position: int, byte: int) -> None:
            if data[position] == byte:
                return
            tampered = Path(directory) / "tampered.jsonl"
            tampered.write_bytes(data[:position] + bytes([byte]) + data[position + 1 :])
            verdict = verify_export(tampered, key=SIGNING_KEY)
            assert not verdict.ok, f"byte {position} -> {byte:#x} accepted: {verdict.message}"

        check()
