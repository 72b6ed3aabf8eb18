"""`python -m audit.verify`: an auditor checks an export without trusting the server.

It accepts a clean export, and rejects (naming the first bad seq) one byte
changed, a row removed, two rows swapped; it rejects an altered manifest of a
filtered export, a wrong key, and an export that disagrees with a signed checkpoint.
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

from audit.chain import Actor, record
from audit.checkpoint import write_checkpoint
from hitl_controlplane.ed25519 import SigningKey, public_key_text
from hitl_controlplane.manifest import jsonl_hashed_text, jsonl_line, sign
from hitl_controlplane.verify import verify_export

from .conftest import SIGNING_KEY
from .exporting import export_to, manifest_path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def eight_events(alice, refund_request, system) -> None:
    """A refund's story, with awkward text in it (commas, quotes, newlines, a formula)."""
    user = Actor.for_user(alice)
    record(
        "request.submitted",
        actor=Actor.for_agent(type("A", (), {"pk": 7, "name": "mail-bot"})()),
        request=refund_request,
        metadata={"note": 'says "hi",\nthen leaves'},
    )
    record(
        "request.queued",
        actor=system,
        request=refund_request,
        metadata={"risk_level": "high", "rule": "refunds", "to": "pending_approval"},
    )
    record("decision.recorded", actor=user, request=refund_request, metadata={"verdict": "approve"})
    record("request.approved", actor=user, request=refund_request, metadata={"to": "approved"})
    record("request.execution_claimed", actor=system, request=refund_request, metadata={"memo": "=SUM(A1:A9)"})
    record("request.succeeded", actor=system, request=refund_request, metadata={"to": "succeeded"})
    record("policy.changed", actor=user, metadata={"amount": "12.30", "é": "ünïcödé"})
    record("agent.created", actor=user, metadata={"name": "-rm -rf"})


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def verify(path: Path, **kwargs) -> tuple[bool, str, int | None]:
    verdict = verify_export(path, key=SIGNING_KEY, **kwargs)
    return verdict.ok, verdict.message, verdict.bad_seq


# --- Clean exports -----------------------------------------------------------------------


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


def run_verifier(*args: str) -> subprocess.CompletedProcess:
    """`python -m audit.verify ARGS` in a clean environment (no key in it), importing this tree's client."""
    return subprocess.run(
        [sys.executable, "-m", "audit.verify", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT / "clients" / "python")},
    )


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


# --- Tampering with an unfiltered export ---------------------------------------------------


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


# --- Filtered exports and the manifest -------------------------------------------------------


@pytest.mark.django_db
def test_a_filtered_export_verifies_through_its_manifest(eight_events, tmp_path):
    path = tmp_path / "filtered.jsonl"
    manifest = export_to(path, verb="request.succeeded")
    ok, message, _ = verify(path)
    assert ok, message
    assert manifest["filters"] == {"verb": "request.succeeded"}
    assert (manifest["row_count"], manifest["first_seq"], manifest["last_seq"]) == (1, 6, 6)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "alteration",
    [
        {"row_count": 2},
        {"filters": {}},
        {"filters": {"verb": "request.approved"}},
        {"chain_head": {"seq": 99, "hash": "0" * 64}},
    ],
    ids=["row_count", "filters-dropped", "filters-changed", "chain_head"],
)
def test_an_altered_manifest_of_a_filtered_export_is_rejected(eight_events, tmp_path, alteration):
    path = tmp_path / "filtered.csv"
    manifest = export_to(path, "csv", agent="7")
    ok, message, _ = verify(path, manifest={**manifest, **alteration})
    assert not ok
    assert "manifest signature invalid" in message


@pytest.mark.django_db
def test_a_row_removed_from_a_filtered_export_is_rejected_by_the_manifest(eight_events, tmp_path):
    path = tmp_path / "filtered.jsonl"
    export_to(path, agent="7")
    lines = lines_of(path)
    path.write_text("".join(lines[:1] + lines[2:]), encoding="utf-8")
    ok, message, _ = verify(path)
    assert not ok
    assert "row_count is 5, the manifest says 6" in message


@pytest.mark.django_db
def test_a_manifest_re_signed_with_another_key_is_rejected(eight_events, tmp_path):
    path = tmp_path / "filtered.csv"
    manifest = export_to(path, "csv", agent="7")
    forged = sign({**manifest, "row_count": 5}, SigningKey.from_secret("another-server's-key-0123456789abcdefghij"))
    ok, message, _ = verify(path, manifest=forged)
    assert not ok and "not among the public keys given" in message
    hmac_signed = sign({**manifest, "row_count": 5}, "an HMAC secret, as older files were signed")
    ok, message, _ = verify(path, manifest=hmac_signed)
    assert not ok and "HMAC" in message


@pytest.mark.django_db
def test_without_a_key_the_verdict_fails_closed(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    verdict = verify_export(path)
    assert (verdict.ok, verdict.signatures_checked) == (False, False)
    assert verdict.message.startswith("UNVERIFIED: 8 rows verified")
    assert "signatures NOT checked (no key given)" in verdict.message and "--no-signatures" in verdict.message


@pytest.mark.django_db
def test_only_an_explicit_no_signatures_accepts_a_structural_check(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    verdict = verify_export(path, no_signatures=True)
    assert (verdict.ok, verdict.signatures_checked) == (True, False)
    assert verdict.message.endswith("signatures NOT checked (--no-signatures)")


@pytest.mark.django_db
def test_the_command_line_without_a_key_exits_non_zero_and_says_why_last(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    unkeyed = run_verifier(str(path))
    assert unkeyed.returncode == 3
    assert unkeyed.stdout.strip().splitlines()[-1].startswith("UNVERIFIED: ")
    assert "signatures NOT checked" in unkeyed.stdout.strip().splitlines()[-1]
    told = run_verifier(str(path), "--no-signatures")
    assert told.returncode == 0
    assert told.stdout.strip().splitlines()[-1].endswith("signatures NOT checked (--no-signatures)")
    both = run_verifier(str(path), "--no-signatures", "--public-key", public_key_text(SIGNING_KEY[0]))
    assert both.returncode == 2, "a key and --no-signatures contradict each other"


@pytest.mark.django_db
def test_a_consistently_rewritten_export_without_a_key_is_not_passed(eight_events, tmp_path):
    """Without a key a rewrite that recomputed every hash is indistinguishable: never exit 0."""
    from .rewriting import rewrite_chain_consistently

    rewrite_chain_consistently(from_seq=3, change={"verdict": "reject"})
    path = tmp_path / "rewritten.jsonl"
    export_to(path)
    rewritten = run_verifier(str(path))
    assert rewritten.returncode == 3 and rewritten.stdout.startswith("UNVERIFIED: ")
    keyed = run_verifier(str(path), "--public-key", public_key_text(SIGNING_KEY[0]))
    assert keyed.returncode == 1 and keyed.stdout.startswith("FAILED at seq 3")


@pytest.mark.django_db
def test_a_tampered_export_without_a_key_exits_1(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    path.write_text("".join(lines[:2] + lines[3:]), encoding="utf-8")
    tampered = run_verifier(str(path))
    assert tampered.returncode == 1 and tampered.stdout.startswith("FAILED at seq 3: ")


@pytest.mark.django_db
def test_a_csv_without_its_sidecar_is_rejected(eight_events, tmp_path):
    path = tmp_path / "export.csv"
    export_to(path, "csv")
    ok, message, _ = verify(path)
    assert not ok and "--manifest" in message


# --- Checkpoints ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_export_agrees_with_an_earlier_signed_checkpoint(eight_events, tmp_path):
    from audit.models import AuditEvent

    fifth = AuditEvent.objects.get(seq=5)
    checkpoint = json.loads(write_checkpoint(5, fifth.hash).read_text())
    path = tmp_path / "export.jsonl"
    export_to(path)
    ok, message, _ = verify(path, checkpoint=checkpoint)
    assert ok, message
    assert "checkpoint seq 5" in message and "matches" in message


@pytest.mark.django_db
def test_a_consistently_rewritten_chain_is_caught_by_the_checkpoint(eight_events, tmp_path):
    """A database superuser can rebuild a chain that verifies on its own; the checkpoint still differs."""
    from audit.models import AuditEvent

    from .rewriting import rewrite_chain_consistently

    checkpoint = json.loads(write_checkpoint(5, AuditEvent.objects.get(seq=5).hash).read_text())
    rewrite_chain_consistently(from_seq=3, change={"verdict": "reject"})
    path = tmp_path / "rewritten.jsonl"
    export_to(path)
    assert verify_export(path, no_signatures=True).ok, "the rewritten chain is self-consistent"
    ok, message, bad_seq = verify(path)
    assert (ok, bad_seq) == (False, 3) and "signature" in message, "but rewriting cannot re-sign"
    assert checkpoint["seq"] == 5


@pytest.mark.django_db
def test_a_forged_checkpoint_is_rejected(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    forged = sign({"type": "cp-audit-checkpoint/1", "seq": 5, "hash": "f" * 64, "time": "x"}, "not the key")
    ok, message, _ = verify(path, checkpoint=forged)
    assert not ok and "checkpoint signature invalid" in message


# --- The JSONL layout ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_jsonl_export_re_serialized_by_a_tool_is_rejected_not_trusted(eight_events, tmp_path):
    """The hashed bytes are the `event` text as written; a file that went through a
    JSON tool (keys reordered, spaces added) no longer holds them, so it must fail
    loudly rather than be checked against a re-encoding."""
    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    lines[3] = json.dumps(json.loads(lines[3]), ensure_ascii=False) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    ok, message, bad_seq = verify(path)
    assert (ok, bad_seq) == (False, 4), message
    assert "re-serialized" in message


@pytest.mark.django_db
def test_an_export_in_the_earlier_layout_with_a_canonical_copy_still_verifies(eight_events, tmp_path):
    """Exports written before the event text stopped being repeated as `canonical`
    stay verifiable, and a tampered copy in them is still caught."""
    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    rows, trailer = lines[:-1], lines[-1]

    def earlier_layout(line: str, edit: bool = False) -> str:
        row = json.loads(line)
        canonical = jsonl_hashed_text(line, row)
        if edit:
            canonical = canonical.replace('"approve"', '"reject"')
        return (
            f'{{"seq":{row["seq"]},"prev_hash":"{row["prev_hash"]}","hash":"{row["hash"]}",'
            f'"event":{canonical},"canonical":{json.dumps(canonical, ensure_ascii=False)}}}\n'
        )

    path.write_text("".join(earlier_layout(line) for line in rows) + trailer, encoding="utf-8")
    assert verify(path)[0], verify(path)[1]
    path.write_text(
        "".join(earlier_layout(line, edit=(i == 2)) for i, line in enumerate(rows)) + trailer, encoding="utf-8"
    )
    ok, message, bad_seq = verify(path)
    assert (ok, bad_seq) == (False, 3), message


# --- Row signatures ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_row_signature_is_checked_with_the_pinned_public_key(eight_events, tmp_path, fmt):
    path = tmp_path / f"export.{fmt}"
    export_to(path, fmt)
    manifest = json.loads(manifest_path(path).read_text()) if fmt == "csv" else None
    ok, message, _ = verify(path, manifest=manifest)
    assert ok and "every row signature valid" in message, message


@pytest.mark.django_db
def test_a_row_carrying_another_rows_signature_is_rejected_at_its_seq(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    lines = lines_of(path)
    donor, victim = json.loads(lines[1]), json.loads(lines[4])
    lines[4] = lines[4].replace(victim["signature"], donor["signature"])
    path.write_text("".join(lines), encoding="utf-8")
    ok, message, bad_seq = verify(path)
    assert (ok, bad_seq) == (False, 5) and "signature does not match" in message, message


@pytest.mark.django_db
def test_an_auditor_who_pinned_another_key_trusts_nothing(eight_events, tmp_path):
    path = tmp_path / "export.jsonl"
    export_to(path)
    stranger = SigningKey.from_secret("someone-else's-audit-key-0123456789abcdefghij").public
    verdict = verify_export(path, key=[stranger])
    assert not verdict.ok and "not trusted" in verdict.message, verdict.message


@pytest.mark.django_db
def test_a_rotation_is_followed_in_a_whole_export_and_named_in_a_filtered_one(alice, system, settings, tmp_path):
    from .conftest import SIGNING_SECRET

    old = SigningKey.from_secret(SIGNING_SECRET)
    record("policy.changed", actor=system, metadata={"step": "before"})
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_PREVIOUS_SIGNING_KEY = (
        "the-next-audit-key-0123456789abcdefghijk",
        SIGNING_SECRET,
    )
    new = SigningKey.from_secret(settings.AUDIT_SIGNING_KEY)
    record("policy.changed", actor=Actor.for_user(alice), metadata={"step": "after"})

    whole = tmp_path / "whole.jsonl"
    export_to(whole)
    assert verify_export(whole, key=[old.public]).ok  # the hand-over, signed by the old key, names the new one
    filtered = tmp_path / "filtered.jsonl"
    export_to(filtered, actor="alice")  # the rotation event is not in it
    assert not verify_export(filtered, key=[old.public]).ok
    assert verify_export(filtered, key=[old.public, new.public]).ok
