"""A witness's rounds against the server, in one process: it cosigns only what is consistent
with what it cosigned before, and the server keeps only configured witnesses' valid cosignatures.

The witness (`hitl_controlplane.witness.witness_once`) talks HTTP through httpx, routed into
Django's test client; tests/audit/test_witness_processes.py runs it as separate processes
against daphne.
"""

from __future__ import annotations

import json

import pytest

from audit import notes, tree, witnesses
from audit.models import AuditCosignature, AuditEvent
from hitl_controlplane import merkle
from hitl_controlplane.assurance import SIGNED, WITNESSED
from hitl_controlplane.signed_note import ED25519, NoteKey, join_note, split_note
from hitl_controlplane.witness import Fork, RoundFailed, State, witness_once

from .rewriting import fork_history
from .witnessing import WITNESS_A, WITNESS_B, append_and_checkpoint, in_process_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def witnesses_a_and_b(settings):
    settings.AUDIT_WITNESSES = [WITNESS_A.vkey, WITNESS_B.vkey]
    settings.AUDIT_WITNESS_QUORUM = 1


def log_vkey() -> NoteKey:
    return NoteKey.parse_vkey(notes.log_key().vkey)  # what a witness pins: the public half only


def a_round(key: NoteKey, state, *, now: int | None = None) -> str:
    client, _ = in_process_client()
    with client:
        return witness_once(client, "http://testserver", log_vkey(), key, state, now=now)


def served() -> str:
    from django.test import Client

    response = Client().get("/audit/checkpoint")
    assert response.status_code == 200
    return response.content.decode()


def test_a_witness_cosigns_the_first_checkpoint_and_the_server_serves_its_line(tmp_path) -> None:
    append_and_checkpoint()
    state = tmp_path / "a.state"
    outcome = a_round(WITNESS_A, state)
    assert outcome.startswith("cosigned size 3") and "trusted on first use" in outcome

    note = served()
    body, signatures = split_note(note)
    assert [s.name for s in signatures] == [notes.log_key().name, WITNESS_A.name]
    assert WITNESS_A.verifies(body, signatures[1])
    assurance = witnesses.assurance_of(note)
    assert (assurance.level, assurance.cosigned, assurance.missing) == (
        WITNESSED,
        ("witness-a.example",),
        ("witness-b.example",),
    )
    assert State.load(state) == State(notes.log_key().name, 3, tree.root(3))
    event = AuditEvent.objects.filter(verb="audit.cosigned").get()
    assert event.metadata["witness"] == "witness-a.example" and event.metadata["tree_size"] == 3
    assert event.actor_label == "witness witness-a.example"


def test_the_next_round_checks_a_consistency_proof_from_the_last_cosigned_size(tmp_path) -> None:
    append_and_checkpoint()
    state = tmp_path / "a.state"
    a_round(WITNESS_A, state)
    assert a_round(WITNESS_A, state).startswith("up to date"), "nothing new: no second cosignature"
    append_and_checkpoint(5)
    client, transport = in_process_client()
    with client:
        outcome = witness_once(client, "http://testserver", log_vkey(), WITNESS_A, state)
    assert outcome.startswith("cosigned size 10"), outcome  # 3 + checkpoint + cosigned + 5 events
    assert ("GET", "/audit/checkpoint/consistency?first=3&size=10") in transport.requests
    assert State.load(state) == State(notes.log_key().name, 10, tree.root(10))
    assert AuditCosignature.objects.filter(witness_vkey=WITNESS_A.vkey).count() == 2


def test_a_forked_log_is_refused_and_the_state_keeps_what_was_cosigned(tmp_path) -> None:
    """The operator rewrites seq 2 and re-signs everything with the real key: the log verifies alone."""
    append_and_checkpoint()
    state = tmp_path / "a.state"
    a_round(WITNESS_A, state)
    before = state.read_text()
    fork_history(from_seq=2, change={"n": 99})
    forked = append_and_checkpoint(2)
    body, signatures = split_note(forked)
    assert log_vkey().verifies(body, signatures[0]), "the forked checkpoint is properly signed by the log key"
    with pytest.raises(Fork, match="consistency proof does not tie it to size 3"):
        a_round(WITNESS_A, state)
    assert state.read_text() == before
    assert witnesses.assurance_of(served()).level == SIGNED, "nobody cosigned the forked checkpoint"


def test_a_rollback_or_another_root_at_the_same_size_is_a_fork(tmp_path) -> None:
    append_and_checkpoint()
    origin = notes.log_key().name
    state = tmp_path / "a.state"
    State(origin, 50, b"\x01" * 32).save(state)
    with pytest.raises(Fork, match="rollback"):
        a_round(WITNESS_A, state)
    State(origin, 3, b"\x01" * 32).save(state)
    with pytest.raises(Fork, match="this witness cosigned size 3 with root 0101"):
        a_round(WITNESS_A, state)
    assert AuditCosignature.objects.count() == 0


def test_a_note_not_signed_by_the_pinned_log_key_is_not_cosigned(tmp_path) -> None:
    append_and_checkpoint()
    impostor = NoteKey.generate(notes.log_key().name, ED25519)
    client, _ = in_process_client()
    with client, pytest.raises(RoundFailed, match="not signed by the pinned log key"):
        witness_once(client, "http://testserver", impostor, WITNESS_A, tmp_path / "a.state")
    assert not (tmp_path / "a.state").exists()


def post(text: str):
    from django.test import Client

    return Client().generic("POST", "/audit/checkpoint/cosignatures", data=text.encode(), content_type="text/plain")


def cosigned(note: str, key: NoteKey, timestamp: int = 1_700_000_000) -> str:
    body, signatures = split_note(note)
    return join_note(body, [signatures[0], key.sign(body, timestamp=timestamp)])


def test_the_server_refuses_bad_cosignatures_with_stable_codes() -> None:
    note = append_and_checkpoint()
    body, signatures = split_note(note)
    stranger = NoteKey.generate("stranger.example", WITNESS_A.kind)
    assert post(cosigned(note, stranger)).json()["code"] == "witness_unknown"
    assert post(cosigned(note, stranger)).status_code == 403
    forged = WITNESS_A.sign(body, timestamp=1)
    wrong = type(forged)(forged.name, forged.key_hash, forged.raw[:8] + bytes(64))
    assert post(join_note(body, [signatures[0], wrong])).json()["code"] == "invalid_cosignature"
    other_root = body.replace(body.split("\n")[2], "A" * 43 + "=")
    assert post(join_note(other_root, [WITNESS_A.sign(other_root, timestamp=1)])).json()["code"] == "checkpoint_unknown"
    assert post(cosigned(note, WITNESS_A, timestamp=2**40)).json()["code"] == "invalid_cosignature"  # the future
    assert post("not a note").json()["code"] == "invalid_cosignature"
    assert post("x" * 20_000).json()["code"] == "invalid_cosignature"
    from django.test import Client

    assert Client().get("/audit/checkpoint/cosignatures").json()["code"] == "method_not_allowed"
    assert AuditCosignature.objects.count() == 0


def test_posting_the_same_cosignature_twice_stores_and_records_it_once() -> None:
    note = append_and_checkpoint()
    first, again = post(cosigned(note, WITNESS_B)), post(cosigned(note, WITNESS_B))
    assert (first.status_code, again.status_code) == (201, 200)
    assert AuditCosignature.objects.count() == 1
    assert AuditEvent.objects.filter(verb="audit.cosigned").count() == 1


def test_consistency_between_published_checkpoints_is_public_and_nothing_else() -> None:
    from django.test import Client

    append_and_checkpoint()  # size 3
    append_and_checkpoint(4)  # size 8
    anonymous = Client()
    proof = anonymous.get("/audit/checkpoint/consistency?first=3&size=8").json()
    nodes = [bytes.fromhex(node) for node in proof["proof"]]
    assert merkle.verify_consistency(3, 8, tree.root(3), tree.root(8), nodes)
    refused = anonymous.get("/audit/checkpoint/consistency?first=4&size=8")
    assert refused.status_code == 404 and refused.json() == {
        "code": "not_a_checkpoint_size",
        "message": refused.json()["message"],
        "details": {"field": "first"},
    }
    assert anonymous.get("/audit/checkpoint/consistency?first=8&size=3").json()["code"] == "invalid_tree_query"
    assert anonymous.get("/audit/checkpoint/consistency?first=x&size=3").json()["code"] == "invalid_tree_query"
    assert anonymous.get("/audit/tree/consistency?first=4&size=8").status_code == 401, "any size stays auditors'"


def test_short_of_quorum_reads_signed_and_says_why(settings) -> None:
    settings.AUDIT_WITNESS_QUORUM = 2
    note = append_and_checkpoint()
    post(cosigned(note, WITNESS_A))
    assurance = witnesses.assurance_of(served())
    assert assurance.level == SIGNED
    assert assurance.reason == (
        "only 1 of 2 pinned witnesses cosigned it (quorum 2); no valid cosignature from witness-b.example"
    )
    post(cosigned(note, WITNESS_B))
    assert witnesses.assurance_of(served()).level == WITNESSED
    settings.AUDIT_WITNESSES = []
    settings.AUDIT_WITNESS_QUORUM = None
    unwitnessed = witnesses.assurance_of(served())
    assert (unwitnessed.level, unwitnessed.reason) == (
        SIGNED,
        "no witnesses are pinned, so only the log's own key vouches for it",
    )
    assert served() == note, "a witness no longer configured is not served"


def test_unusable_witness_settings_are_refused(settings) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.AUDIT_WITNESS_QUORUM = 3
    with pytest.raises(ImproperlyConfigured, match="AUDIT_WITNESS_QUORUM"):
        witnesses.configured()
    settings.AUDIT_WITNESS_QUORUM = None
    assert witnesses.configured().quorum == 2, "a majority of two"
    settings.AUDIT_WITNESSES = [notes.log_key().vkey]
    with pytest.raises(ImproperlyConfigured, match="cosignature/v1"):
        witnesses.configured()


def test_the_state_file_is_replaced_whole(tmp_path) -> None:
    state = tmp_path / "w.state"
    State("log", 7, b"\x02" * 32).save(state)
    assert json.loads(state.read_text()) == {"origin": "log", "root_hash": "02" * 32, "size": 7}
    assert [path.name for path in tmp_path.iterdir()] == ["w.state"], "no temporary file left behind"


def test_the_auditor_page_shows_the_checkpoint_its_witnesses_and_why_it_reads_signed(settings, auditor_ann) -> None:
    from django.test import Client

    settings.AUDIT_WITNESS_QUORUM = 2
    note = append_and_checkpoint()
    post(cosigned(note, WITNESS_A))
    client = Client()
    client.force_login(auditor_ann)
    page = client.get("/audit/").content.decode()
    assert "Tree size 3: <strong>signed</strong>" in page
    assert (
        "Signed by the log key only: only 1 of 2 pinned witnesses cosigned it (quorum 2); no valid cosignature from witness-b.example."
        in page
    )
    assert '<li data-witness="witness-b.example">' in page and "has not cosigned this checkpoint" in page
    assert "its newest consistency check reached tree size 3" in page and tree.root(3).hex() in page
    post(cosigned(note, WITNESS_B))
    page = client.get("/audit/").content.decode()
    assert "Tree size 3: <strong>witnessed</strong>" in page
    assert "Witnessed: 2 of 2 pinned witnesses cosigned it (quorum 2): witness-a.example, witness-b.example." in page


def test_the_client_distribution_installs_the_witness_command() -> None:
    import importlib
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "clients/python/pyproject.toml").read_text())
    module, _, function = project["project"]["scripts"]["hitl-witness"].partition(":")
    assert (module, function) == ("hitl_controlplane.witness", "main")
    assert callable(getattr(importlib.import_module(module), function))


def test_a_periodic_checkpoint_is_issued_only_when_the_log_grew(tmp_path) -> None:
    assert notes.checkpoint_if_grown() is None, "an empty log"
    append_and_checkpoint()
    assert notes.checkpoint_if_grown() is None, "only the checkpoint itself since"
    post(cosigned(notes.newest_note(), WITNESS_A))
    assert notes.checkpoint_if_grown() is None, "a cosignature does not make the log grow either"
    append_and_checkpoint(0)
    from audit.chain import Actor, record

    record("policy.changed", actor=Actor.system(), metadata={})
    note = notes.checkpoint_if_grown()
    assert note is not None and note == notes.newest_note()


def test_the_local_witness_key_is_made_once_and_its_vkey_printed(settings, tmp_path) -> None:
    from io import StringIO

    from django.core.management import call_command

    settings.VAR_DIR = tmp_path
    out = StringIO()
    call_command("audit_local_witness", "--vkey", stdout=out)
    again = StringIO()
    call_command("audit_local_witness", "--vkey", stdout=again)
    assert out.getvalue() == again.getvalue() and out.getvalue().startswith("local-witness.localhost+")
    assert NoteKey.parse_vkey(out.getvalue()).kind == WITNESS_A.kind


# --- Attacks ---------------------------------------------------------------------------------


def test_a_cosignature_replayed_onto_another_checkpoint_is_refused() -> None:
    first = append_and_checkpoint()
    line = split_note(cosigned(first, WITNESS_A))[1][1]
    second = append_and_checkpoint()
    body, signatures = split_note(second)
    assert post(join_note(body, [signatures[0], line])).json()["code"] == "invalid_cosignature"
    extended = body + "an extension line\n"
    sneaked = join_note(extended, [WITNESS_A.sign(extended, timestamp=1)])
    assert post(sneaked).json()["code"] == "checkpoint_unknown", "a body the log never issued"
    assert AuditCosignature.objects.count() == 0


def test_a_post_without_a_length_is_refused() -> None:
    from django.test import Client

    note = cosigned(append_and_checkpoint(), WITNESS_A)
    answer = Client().generic(
        "POST", "/audit/checkpoint/cosignatures", data=note.encode(), content_type="text/plain", CONTENT_LENGTH=""
    )
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_cosignature"


def test_a_stranger_posting_alongside_a_witness_stores_only_the_witness() -> None:
    note = append_and_checkpoint()
    body, signatures = split_note(note)
    stranger = NoteKey.generate("witness-a.example", WITNESS_A.kind)  # the same name, another key
    both = join_note(body, [signatures[0], stranger.sign(body, timestamp=5), WITNESS_B.sign(body, timestamp=6)])
    assert post(both).status_code == 201
    assert list(AuditCosignature.objects.values_list("witness_name", flat=True)) == ["witness-b.example"]
    assert [s.name for s in split_note(served())[1]] == [notes.log_key().name, "witness-b.example"]


def test_an_unreadable_state_file_stops_the_witness_instead_of_trusting_anew(tmp_path) -> None:
    append_and_checkpoint()
    state = tmp_path / "a.state"
    state.write_text("{not json")
    with pytest.raises(RoundFailed, match="unreadable"):
        a_round(WITNESS_A, state)
    assert AuditCosignature.objects.count() == 0


def test_a_bad_witness_setting_fails_the_system_checks(settings) -> None:
    from audit.checks import witness_settings

    assert witness_settings(None) == []
    settings.AUDIT_WITNESSES = ["not-a-vkey"]
    assert [error.id for error in witness_settings(None)] == ["audit.E001"]


def test_a_refused_post_is_retried_next_round_on_the_same_checkpoint(settings, tmp_path) -> None:
    """The state is written before signing; a post the server refused is sent again, not skipped."""
    settings.AUDIT_WITNESSES = [WITNESS_B.vkey]  # witness A is not configured yet
    append_and_checkpoint()
    state = tmp_path / "a.state"
    with pytest.raises(RoundFailed, match="witness_unknown"):
        a_round(WITNESS_A, state)
    assert State.load(state).size == 3
    settings.AUDIT_WITNESSES = [WITNESS_A.vkey, WITNESS_B.vkey]
    assert a_round(WITNESS_A, state).startswith("cosigned size 3")
    assert witnesses.assurance_of(served()).cosigned == ("witness-a.example",)
