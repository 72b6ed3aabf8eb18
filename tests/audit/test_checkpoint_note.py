"""The server's signed-note checkpoints: issued over the tree, recorded in the chain, served publicly."""

from __future__ import annotations

import pytest

from audit import notes, tree
from audit.chain import record
from hitl_controlplane.signed_note import NoteKey, parse_checkpoint, split_note

pytestmark = pytest.mark.django_db


def test_no_checkpoint_yet_is_a_json_404(client) -> None:
    response = client.get("/audit/checkpoint")
    assert response.status_code == 404 and response.json()["code"] == "checkpoint_not_found"


def test_the_newest_checkpoint_is_served_signed_and_recorded_in_the_chain(client, system) -> None:
    for _ in range(3):
        record("audit.exported", actor=system, metadata={})
    notes.issue_checkpoint()
    record("audit.exported", actor=system, metadata={})
    note = notes.issue_checkpoint()

    response = client.get("/audit/checkpoint")  # anonymous: a checkpoint holds nothing secret
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == note
    body, signatures = split_note(note)
    checkpoint = parse_checkpoint(body)
    assert checkpoint.size == 5  # 4 exports and the first checkpoint's own event
    assert checkpoint.root_hash == tree.root(5)
    assert NoteKey.parse_vkey(notes.log_key().vkey).verifies(body, signatures[0])
    assert client.post("/audit/checkpoint").status_code == 405


def test_the_command_issues_a_checkpoint_and_prints_the_vkey() -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("audit_checkpoint", stdout=out)
    assert out.getvalue() == notes.newest_note()
    out = StringIO()
    call_command("audit_checkpoint", "--vkey", stdout=out)
    assert out.getvalue().strip() == notes.log_key().vkey
