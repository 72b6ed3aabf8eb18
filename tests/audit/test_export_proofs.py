"""Exports carry their proof: the newest checkpoint (with its cosignatures) and one range proof
tying the rows to its tree, and the offline verifier prints the assurance it reached.

`witnessed` needs the log key and the pinned witnesses' quorum; with the log key only the same
export reads `signed`. A forked log (the operator rewrites a row and re-signs everything with the
real key, tests/audit/rewriting.py) exports a file that passes a log-key-only check and fails
against the pinned witness keys; pinning the old, witnessed checkpoint to the forked rows fails
the proof. A row altered in an export, re-hashed and re-signed with the real key, fails the proof.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from audit import notes, tree, witnesses
from audit.signing import signer
from hitl_controlplane.canonical import canonical_bytes, chain_hash
from hitl_controlplane.export_assurance import TreePins
from hitl_controlplane.manifest import ExportDigests, jsonl_line, sign
from hitl_controlplane.signed_note import NoteKey
from hitl_controlplane.verify import verify_export
from hitl_controlplane.witness import Fork, witness_once

from .conftest import SIGNING_KEY
from .exporting import export_to, jsonl_rows
from .rewriting import fork_history
from .verifier_story import run_verifier
from .witnessing import WITNESS_A, WITNESS_B, append_and_checkpoint, in_process_client

pytestmark = pytest.mark.django_db

BOTH = TreePins(witnesses=(WITNESS_A, WITNESS_B), quorum=2)


@pytest.fixture(autouse=True)
def a_quorum_of_both_witnesses(settings):
    settings.AUDIT_WITNESSES = [WITNESS_A.vkey, WITNESS_B.vkey]
    settings.AUDIT_WITNESS_QUORUM = 2


def log_vkey() -> NoteKey:
    return NoteKey.parse_vkey(notes.log_key().vkey)


def a_round(key: NoteKey, state: Path) -> str:
    client, _ = in_process_client()
    with client:
        return witness_once(client, "http://testserver", log_vkey(), key, state)


def test_an_export_carries_the_newest_checkpoint_with_its_cosignatures_and_one_range_proof(tmp_path) -> None:
    append_and_checkpoint(6)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    size = tree.size()
    manifest = export_to(tmp_path / "export.jsonl")
    newest = witnesses.newest_checkpoint()
    assert newest is not None
    assert manifest["checkpoint_note"] == witnesses.served_note(newest[0], newest[1])
    assert manifest["checkpoint_note"].count("\u2014 ") == 3, "the log's signature and both cosignatures"
    proof = manifest["range_proof"]
    checkpoint_size = newest[1].splitlines()[1]
    assert (proof["start"], proof["end"], str(proof["tree_size"])) == (0, int(checkpoint_size), checkpoint_size)
    assert proof["left"] == [] and proof["end"] < manifest["last_seq"] <= size + 3
    assert proof["consistency"] == [], "the export's run ends at the checkpoint's size: its root is the root"
    assert "range_proof_absent" not in manifest


def test_it_verifies_witnessed_with_the_quorums_keys_and_signed_with_the_log_key_only(tmp_path) -> None:
    append_and_checkpoint(6)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    path = tmp_path / "export.jsonl"
    export_to(path)

    witnessed = verify_export(path, key=SIGNING_KEY, pins=BOTH)
    assert (witnessed.ok, witnessed.assurance) == (True, "witnessed"), witnessed.message
    assert "range proof: seq 1-" in witnessed.message
    assert "assurance witnessed: these rows are in a checkpoint" in witnessed.message
    assert "2 of 2 pinned witnesses cosigned it" in witnessed.message

    signed = verify_export(path, key=SIGNING_KEY)
    assert (signed.ok, signed.assurance) == (True, "signed"), signed.message
    assert "assurance signed: the log's own key signed these rows" in signed.message

    by_command = run_verifier(
        str(path),
        "--log-vkey",
        notes.log_key().vkey,
        "--witness-vkey",
        WITNESS_A.vkey,
        "--witness-vkey",
        WITNESS_B.vkey,
        "--quorum",
        "2",
    )
    assert by_command.returncode == 0, by_command.stdout + by_command.stderr
    assert "assurance witnessed" in by_command.stdout.strip().splitlines()[-1]


def test_a_checkpoint_short_of_the_quorum_reads_signed_and_fails_when_witnessed_is_required(tmp_path) -> None:
    append_and_checkpoint(4)
    a_round(WITNESS_A, tmp_path / "a.state")  # B never comes
    path = tmp_path / "export.jsonl"
    export_to(path)
    verdict = verify_export(path, key=SIGNING_KEY, pins=BOTH)
    assert not verdict.ok
    assert verdict.message.startswith("FAILED: assurance signed, witnessed required: only 1 of 2 pinned witnesses")
    assert "no valid cosignature from witness-b.example" in verdict.message
    one_of_two = verify_export(path, key=SIGNING_KEY, pins=TreePins(witnesses=(WITNESS_A, WITNESS_B), quorum=1))
    assert (one_of_two.ok, one_of_two.assurance) == (True, "witnessed"), one_of_two.message
    asked_less = verify_export(
        path, key=SIGNING_KEY, pins=TreePins(witnesses=BOTH.witnesses, quorum=2, require="signed")
    )
    assert (asked_less.ok, asked_less.assurance) == (True, "signed"), asked_less.message


def test_an_export_of_a_forked_log_passes_the_log_key_and_fails_against_the_witnesses(tmp_path) -> None:
    append_and_checkpoint(5)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    fork_history(from_seq=2, change={"n": 99})
    append_and_checkpoint(2)
    for key, state in ((WITNESS_A, "a.state"), (WITNESS_B, "b.state")):
        with pytest.raises(Fork):
            a_round(key, tmp_path / state)
    path = tmp_path / "forked.jsonl"
    export_to(path)

    alone = verify_export(path, key=SIGNING_KEY)
    assert (alone.ok, alone.assurance) == (True, "signed"), "the operator's key vouches for its own fork"
    against_witnesses = verify_export(path, key=SIGNING_KEY, pins=BOTH)
    assert not against_witnesses.ok
    assert "FAILED: assurance signed, witnessed required: only 0 of 2" in against_witnesses.message
    by_command = run_verifier(
        str(path), "--public-key-file", _public_key_file(tmp_path), "--witness-vkey", WITNESS_A.vkey
    )
    assert by_command.returncode == 1, by_command.stdout
    assert by_command.stdout.startswith("FAILED: assurance signed, witnessed required")


def test_the_forked_rows_under_the_old_witnessed_checkpoint_fail_the_proof(tmp_path) -> None:
    """The operator keeps the checkpoint the witnesses cosigned and re-signs the manifest: the proof breaks."""
    append_and_checkpoint(5)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    honest = witnesses.newest_checkpoint()
    assert honest is not None
    old_note, old_size = witnesses.served_note(honest[0], honest[1]), int(honest[1].splitlines()[1])
    fork_history(from_seq=2, change={"n": 99})
    path = tmp_path / "forked.jsonl"
    manifest = export_to(path)
    left, consistency = tree.range_proof(0, old_size, old_size)  # from the forked tree: the old root is not its
    forged = {
        **manifest,
        "checkpoint_note": old_note,
        "range_proof": {**manifest["range_proof"], "end": old_size, "tree_size": old_size},
    }
    forged["range_proof"].update(left=[n.hex() for n in left], consistency=[n.hex() for n in consistency])
    _rewrite_trailer(path, sign(forged, signer().current))
    verdict = verify_export(path, key=SIGNING_KEY, pins=BOTH)
    assert not verdict.ok
    assert f"seq 1-{old_size} are not in the checkpoint's tree of {old_size} events" in verdict.message
    assert "altered or the log forked" in verdict.message


def test_a_row_altered_in_a_contiguous_filtered_export_fails_the_proof(tmp_path) -> None:
    """Re-hashed and re-signed with the real key, so the row, its signature and the manifest all hold."""
    append_and_checkpoint(3)
    since = timezone.now()
    append_and_checkpoint(6)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    path = tmp_path / "since.jsonl"
    manifest = export_to(path, since=since.isoformat())
    proof = manifest["range_proof"]
    assert proof is not None and proof["start"] == manifest["first_seq"] - 1 > 0
    assert proof["left"], "a run that starts mid-tree carries the compact range left of it"
    assert verify_export(path, key=SIGNING_KEY, pins=BOTH).assurance == "witnessed"

    rows, _ = jsonl_rows(path.read_bytes())
    target = rows[2]
    event = {**target["event"], "metadata": {"n": 1000}}
    canonical = canonical_bytes(event).decode()
    new_hash = chain_hash(target["prev_hash"], canonical.encode())
    key = signer().current
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = jsonl_line(target["seq"], target["prev_hash"], new_hash, canonical, key.key_id, key.sign(new_hash))
    digests = ExportDigests()
    for index, row in enumerate(rows):
        digests.add(row["seq"], new_hash if index == 2 else row["hash"])
    path.write_text("".join(lines[:-1]), encoding="utf-8")
    _rewrite_trailer(path, sign({**manifest, **digests.as_manifest_fields()}, key))

    verdict = verify_export(path, key=SIGNING_KEY)
    assert not verdict.ok, "only the proof can tell: the operator re-signed the row and the manifest"
    assert "are not in the checkpoint's tree" in verdict.message


def test_a_filtered_export_that_is_not_one_run_says_it_carries_no_proof(tmp_path) -> None:
    append_and_checkpoint(2)
    append_and_checkpoint(2)  # policy.changed at seq 1, 2, 4, 5; checkpoints at 3 and 6
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    cosigned = export_to(tmp_path / "cosigned.jsonl", verb="audit.cosigned")
    assert cosigned["range_proof_absent"] == "every exported row is newer than the checkpoint's tree of 5 events"
    path = tmp_path / "policy.jsonl"
    manifest = export_to(path, verb="policy.changed")
    assert (manifest["row_count"], manifest["first_seq"], manifest["last_seq"]) == (4, 1, 5)
    assert manifest["range_proof"] is None and manifest["checkpoint_note"]
    assert "not one contiguous seq run carries no proof" in manifest["range_proof_absent"]
    signed = verify_export(path, key=SIGNING_KEY)
    assert (signed.ok, signed.assurance) == (True, "signed"), signed.message
    assert "no range proof: a filtered export whose rows are not one contiguous seq run" in signed.message
    refused = verify_export(path, key=SIGNING_KEY, pins=BOTH)
    assert not refused.ok and "but no row is proven in it" in refused.message


def test_an_export_before_any_checkpoint_reads_signed_and_says_why(tmp_path) -> None:
    from audit.chain import Actor, record

    record("policy.changed", actor=Actor.system(), metadata={"n": 1})
    path = tmp_path / "early.jsonl"
    manifest = export_to(path)
    assert manifest["checkpoint_note"] is None
    verdict = verify_export(path, key=SIGNING_KEY)
    assert (verdict.ok, verdict.assurance) == (True, "signed")
    assert "no checkpoint had been issued when the export began" in verdict.message
    structural = verify_export(path, no_signatures=True)
    assert (structural.ok, structural.assurance) == (True, "unsigned")


def _public_key_file(tmp_path: Path) -> str:
    from hitl_controlplane.ed25519 import public_key_text

    keys = tmp_path / "server.pub"
    keys.write_text(public_key_text(SIGNING_KEY[0]) + "\n", encoding="utf-8")
    return str(keys)


def _rewrite_trailer(path: Path, manifest: dict[str, Any]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and lines[-1].startswith('{"manifest"'):
        lines = lines[:-1]
    trailer = json.dumps({"manifest": manifest}, sort_keys=True, ensure_ascii=False) + "\n"
    path.write_text("".join(lines) + trailer, encoding="utf-8")


def test_a_proof_narrowed_to_a_few_rows_or_a_witness_pinned_twice_is_refused(tmp_path) -> None:
    """The operator cannot earn `witnessed` for a whole export by proving only its first row."""
    append_and_checkpoint(6)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    path = tmp_path / "export.jsonl"
    manifest = export_to(path)
    size = manifest["range_proof"]["tree_size"]
    left, consistency = tree.range_proof(0, 1, size)
    narrowed = {
        **manifest["range_proof"],
        "end": 1,
        "left": [n.hex() for n in left],
        "consistency": [n.hex() for n in consistency],
    }
    _rewrite_trailer(path, sign({**manifest, "range_proof": narrowed}, signer().current))
    verdict = verify_export(path, key=SIGNING_KEY, pins=BOTH)
    assert not verdict.ok
    assert f"the range proof covers seq 1-1, not the exported rows seq 1-{size}" in verdict.message
    with pytest.raises(ValueError, match="pinned twice"):
        TreePins(witnesses=(WITNESS_A, WITNESS_A), quorum=2)


def test_a_csv_export_carries_the_same_proof_in_its_sidecar(tmp_path) -> None:
    append_and_checkpoint(5)
    a_round(WITNESS_A, tmp_path / "a.state")
    a_round(WITNESS_B, tmp_path / "b.state")
    path = tmp_path / "export.csv"
    manifest = export_to(path, "csv")
    assert manifest["range_proof"]["end"] == manifest["range_proof"]["tree_size"]
    verdict = verify_export(path, manifest=manifest, key=SIGNING_KEY, pins=BOTH)
    assert (verdict.ok, verdict.assurance) == (True, "witnessed"), verdict.message


def test_the_command_reads_the_witness_keys_and_quorum_from_the_environment(tmp_path, monkeypatch, capsys) -> None:
    from hitl_controlplane.verify import main

    append_and_checkpoint(3)
    a_round(WITNESS_A, tmp_path / "a.state")
    path = tmp_path / "export.jsonl"
    export_to(path)
    keys = _public_key_file(tmp_path)
    monkeypatch.setenv("HITL_AUDIT_WITNESS_VKEYS", f"{WITNESS_A.vkey} {WITNESS_B.vkey}")
    monkeypatch.setenv("HITL_AUDIT_WITNESS_QUORUM", "1")
    assert main([str(path), "--public-key-file", keys]) == 0
    assert "assurance witnessed" in capsys.readouterr().out
    monkeypatch.setenv("HITL_AUDIT_WITNESS_QUORUM", "2")
    assert main([str(path), "--public-key-file", keys]) == 1
    assert capsys.readouterr().out.startswith("FAILED: assurance signed, witnessed required: only 1 of 2")
    monkeypatch.setenv("HITL_AUDIT_WITNESS_QUORUM", "3")
    assert main([str(path), "--public-key-file", keys]) == 1
    assert "a witness quorum is between 1 and the 2 witnesses pinned, not 3" in capsys.readouterr().out
    monkeypatch.setenv("HITL_AUDIT_WITNESS_VKEYS", "not-a-vkey")
    assert main([str(path), "--public-key-file", keys]) == 1
    assert capsys.readouterr().out.startswith("FAILED: a verifier key is <name>+<8 hex digits>+<base64>")


def test_a_checkpoint_signed_by_another_key_fails_even_when_the_rows_fit_it(tmp_path) -> None:
    from hitl_controlplane.signed_note import ED25519, join_note, split_note

    append_and_checkpoint(4)
    path = tmp_path / "export.jsonl"
    manifest = export_to(path)
    body = split_note(manifest["checkpoint_note"])[0]
    impostor = NoteKey.generate(notes.log_key().name, ED25519)  # the same origin, another key
    _rewrite_trailer(
        path, sign({**manifest, "checkpoint_note": join_note(body, [impostor.sign(body)])}, signer().current)
    )
    verdict = verify_export(path, key=SIGNING_KEY)
    assert not verdict.ok
    assert "the export's checkpoint is not the pinned log's: no signature on it verifies" in verdict.message
