"""Signed notes and cosignatures (hitl_controlplane.signed_note) against the normative note_vectors_file and tampering."""

from __future__ import annotations

import json

import pytest

from hitl_controlplane.signed_note import NoteError, NoteKey, Signature, parse_checkpoint, split_note
from tests.audit import note_vectors


@pytest.fixture(scope="module")
def note_vectors_file() -> dict:
    return json.loads(note_vectors.PATH.read_text(encoding="utf-8"))


def test_the_vectors_file_is_what_the_code_builds(note_vectors_file: dict) -> None:
    assert note_vectors_file == note_vectors.build(), "run `python -m tests.audit.note_vectors` and review the diff"


def test_the_vector_note_verifies_under_its_log_and_witness_keys(note_vectors_file: dict) -> None:
    body, signatures = split_note(note_vectors_file["note"])
    assert body == note_vectors_file["checkpoint"]["body"]
    checkpoint = parse_checkpoint(body)
    assert (checkpoint.origin, checkpoint.size, checkpoint.root_hash.hex()) == (
        note_vectors_file["checkpoint"]["origin"],
        note_vectors_file["checkpoint"]["tree_size"],
        note_vectors_file["checkpoint"]["root_hash"],
    )
    keys = [
        NoteKey.parse_vkey(note_vectors_file["log"]["vkey"]),
        *(NoteKey.parse_vkey(w["vkey"]) for w in note_vectors_file["witnesses"]),
    ]
    assert [key.verifies(body, signature) for key, signature in zip(keys, signatures, strict=True)] == [True] * 3
    assert [s.timestamp for s in signatures[1:]] == [w["time"] for w in note_vectors_file["witnesses"]]
    # A key never verifies another key's line, and the log key is not a cosigner.
    assert not keys[0].verifies(body, signatures[1])
    assert not keys[1].verifies(body, signatures[2])


@pytest.mark.parametrize(
    "change",
    [
        lambda body: body.replace("\n42\n", "\n43\n"),
        lambda body: body.replace("rgeY", "rgeZ"),
        lambda body: body.replace("controlplane.example/audit", "controlplane.example/other"),
    ],
    ids=["size", "root", "origin"],
)
def test_a_changed_body_fails_every_signature(note_vectors_file: dict, change) -> None:
    body, signatures = split_note(note_vectors_file["note"])
    keys = [
        NoteKey.parse_vkey(note_vectors_file["log"]["vkey"]),
        *(NoteKey.parse_vkey(w["vkey"]) for w in note_vectors_file["witnesses"]),
    ]
    assert not any(key.verifies(change(body), s) for key, s in zip(keys, signatures, strict=True))


def test_a_changed_cosignature_time_fails(note_vectors_file: dict) -> None:
    body, signatures = split_note(note_vectors_file["note"])
    witness = NoteKey.parse_vkey(note_vectors_file["witnesses"][0]["vkey"])
    cosig = signatures[1]
    later = Signature(cosig.name, cosig.key_hash, (cosig.timestamp + 1).to_bytes(8, "big") + cosig.raw[8:])
    assert witness.verifies(body, cosig) and not witness.verifies(body, later)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "origin\n1\n",  # no signatures
        "origin\n\n1\n\n— k AAAAAAA=\n",  # an empty body line
        "origin\n1\nAAAA\n\n- k AAAAAAA=\n",  # a hyphen, not an em dash
        "origin\n1\nAAAA\n\n— k not*base64\n",
        "origin\n1\nAAAA\n\n— k AAAAAAA=",  # the last line is not terminated
        "x\n" * 9000 + "\n— k AAAAAAA=\n",  # over the size bound
    ],
)
def test_malformed_notes_are_refused(text: str) -> None:
    with pytest.raises(NoteError):
        split_note(text)


@pytest.mark.parametrize(
    "body",
    ["o\n01\n" + "A" * 43 + "=\n", "o\n-1\n" + "A" * 43 + "=\n", "o\n1\nAAAA\n", "o\n1\n"],
    ids=["leading zero", "negative", "short root", "two lines"],
)
def test_malformed_checkpoints_are_refused(body: str) -> None:
    with pytest.raises(NoteError):
        parse_checkpoint(body)


def test_keys_round_trip_and_refuse_a_wrong_hash(note_vectors_file: dict) -> None:
    vkey = note_vectors_file["witnesses"][0]["vkey"]
    key = NoteKey.parse_vkey(vkey)
    assert key.vkey == vkey
    name, _, rest = vkey.partition("+")
    with pytest.raises(NoteError):
        NoteKey.parse_vkey(f"{name}+00000000+{rest.partition('+')[2]}")
    private = NoteKey.generate("w", key.kind)
    assert NoteKey.parse_private(private.private_text()).vkey == private.vkey
