"""`python -m audit.verify`: what vouches for an export. A filtered export verifies through its
signed manifest, and an altered or re-signed manifest is rejected; without a key the verdict
fails closed unless the auditor says `--no-signatures`; a signed checkpoint catches a
consistently rewritten chain; every row signature is checked with the pinned public keys,
across a key rotation; an export re-serialized by a tool is rejected, an earlier layout still
verifies.
"""

from __future__ import annotations

import json

import pytest

from audit.chain import Actor, record
from audit.checkpoint import write_checkpoint
from hitl_controlplane.ed25519 import SigningKey, public_key_text
from hitl_controlplane.manifest import jsonl_hashed_text, sign
from hitl_controlplane.verify import verify_export

from .conftest import SIGNING_KEY
from .exporting import export_to, manifest_path
from .verifier_story import lines_of, run_verifier, verify


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
