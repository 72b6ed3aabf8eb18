"""Every audit event is signed by a key outside the database, so a role that may only
INSERT cannot forge one that verifies; rotation hands trust over from key to key;
rows from before signing are sealed once; a deleted tail shows against checkpoints."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from audit import signing
from audit.chain import Actor, head, record, verify_chain
from audit.checkpoint import latest_checkpoint
from audit.db import maintenance
from audit.models import AuditEvent
from hitl_controlplane.canonical import GENESIS_HASH, canonical_bytes, chain_hash, event_document, format_timestamp

TABLE = AuditEvent._meta.db_table
OLD_SECRET = "audit-signing-secret-one-0123456789abcdefghijklmnop"
NEW_SECRET = "audit-signing-secret-two-0123456789abcdefghijklmnop"

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_events(alice, refund_request, system) -> None:
    record("request.submitted", actor=Actor.for_user(alice), request=refund_request)
    record("request.queued", actor=system, request=refund_request, metadata={"rule": "refunds"})
    record("request.approved", actor=system, request=refund_request)


def insert_forged(*, label: str = "bob", key_id: str = "", signature: str = "") -> int:
    """What a role with only INSERT can do: take the head, chain a new row, insert it."""
    seq, prev_hash = head()
    seq += 1
    document = event_document(
        seq=seq,
        occurred_at=format_timestamp(AuditEvent.objects.last().occurred_at),
        actor_kind="user",
        actor_id="2",
        actor_label=label,
        verb="decision.recorded",
        request_id=None,
        agent_id=None,
        metadata={"decision": "approve"},
    )
    canonical = canonical_bytes(document)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (seq, occurred_at, actor_kind, actor_id, actor_label, verb, request_id, agent_id,"
            " metadata, prev_hash, hash, canonical, key_id, signature)"
            " VALUES (%s, %s, 'user', '2', %s, 'decision.recorded', NULL, NULL, %s, %s, %s, %s, %s, %s)",
            [
                seq,
                AuditEvent.objects.last().occurred_at,
                label,
                json.dumps({"decision": "approve"}),
                prev_hash,
                chain_hash(prev_hash, canonical),
                canonical.decode(),
                key_id,
                signature,
            ],
        )
    return seq


def verify_command(*args: str) -> str:
    out = io.StringIO()
    call_command("audit_verify", "--no-record", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_every_event_is_signed_by_the_current_key(three_events, settings):
    key = signing.SigningKey.from_secret(settings.AUDIT_SIGNING_KEY)
    for row in AuditEvent.objects.all():
        assert row.key_id == key.key_id
        assert signing.verify_signature(key.public, row.hash, row.signature)
    assert verify_chain().ok


@pytest.mark.parametrize("how", ["unsigned", "copied", "other-key"])
def test_an_inserted_forgery_is_found_naming_its_seq(three_events, how):
    victim = AuditEvent.objects.get(seq=2)
    outsider = signing.SigningKey.from_secret("an-attackers-own-key-0123456789abcdefghijkl")
    forged_by = {
        "unsigned": {},
        "copied": {"key_id": victim.key_id, "signature": victim.signature},
        "other-key": {"key_id": victim.key_id, "signature": outsider.sign("0" * 64)},
    }[how]
    seq = insert_forged(**forged_by)
    with pytest.raises(CommandError):
        verify_command()
    result = verify_chain()
    assert (result.ok, result.bad_seq) == (False, seq)
    assert "sign" in result.reason


def test_a_key_nobody_pinned_is_not_trusted(three_events):
    stranger = signing.SigningKey.from_secret("someone-elses-key-0123456789abcdefghijklmnop")
    result = verify_chain(trusted_keys=[stranger.public])
    assert (result.ok, result.bad_seq) == (False, 1)
    assert "not trusted" in result.reason


def test_rotation_hands_trust_to_the_next_key(alice, refund_request, system, settings):
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_PREVIOUS_SIGNING_KEY = OLD_SECRET, ""
    old = signing.SigningKey.from_secret(OLD_SECRET)
    record("request.submitted", actor=Actor.for_user(alice), request=refund_request)

    settings.AUDIT_SIGNING_KEY, settings.AUDIT_PREVIOUS_SIGNING_KEY = NEW_SECRET, OLD_SECRET
    new = signing.SigningKey.from_secret(NEW_SECRET)
    record("request.queued", actor=system, request=refund_request)

    rows = list(AuditEvent.objects.values_list("verb", "key_id"))
    assert rows == [
        ("request.submitted", old.key_id),
        ("audit.key_rotated", old.key_id),
        ("request.queued", new.key_id),
    ]
    # An auditor who pinned only the old key follows the hand-over.
    assert verify_chain(trusted_keys=[old.public]).ok
    # The retired key signs nothing after the hand-over.
    insert_forged(key_id=old.key_id, signature=old.sign(head()[1]))
    result = verify_chain(trusted_keys=[old.public])
    assert not result.ok and "retired" in result.reason


def test_a_process_the_chain_has_moved_past_refuses_to_append(alice, refund_request, system, settings):
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_PREVIOUS_SIGNING_KEY = NEW_SECRET, OLD_SECRET
    record("request.submitted", actor=Actor.for_user(alice), request=refund_request)
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_PREVIOUS_SIGNING_KEY = OLD_SECRET, ""
    with pytest.raises(signing.ChainMovedOn):
        record("request.queued", actor=system, request=refund_request)
    assert AuditEvent.objects.count() == 1


def legacy_rows(count: int) -> None:
    """Rows as they were written before signing existed: chained, unsigned."""
    prev_hash = GENESIS_HASH
    with connection.cursor() as cursor:
        for seq in range(1, count + 1):
            occurred = AuditEvent._meta.get_field("occurred_at").to_python("2026-11-01T10:00:00Z")
            canonical = canonical_bytes(
                event_document(
                    seq=seq,
                    occurred_at=format_timestamp(occurred),
                    actor_kind="system",
                    actor_id="",
                    actor_label="system",
                    verb="request.expired",
                    request_id=None,
                    agent_id=None,
                    metadata={},
                )
            )
            row_hash = chain_hash(prev_hash, canonical)
            cursor.execute(
                f"INSERT INTO {TABLE} (seq, occurred_at, actor_kind, actor_id, actor_label, verb, request_id,"
                " agent_id, metadata, prev_hash, hash, canonical, key_id, signature)"
                " VALUES (%s, %s, 'system', '', 'system', 'request.expired', NULL, NULL, '{}', %s, %s, %s, '', '')",
                [seq, occurred, prev_hash, row_hash, canonical.decode()],
            )
            prev_hash = row_hash


def test_rows_from_before_signing_verify_once_sealed(system):
    legacy_rows(3)
    record("request.queued", actor=system)  # the first signed row after the upgrade
    result = verify_chain()
    assert not result.ok and "audit_seal" in result.reason and result.bad_seq == 3

    out = io.StringIO()
    call_command("audit_seal", stdout=out)
    assert "Sealed rows 1..3" in out.getvalue()
    assert verify_chain().ok
    call_command("audit_seal", stdout=out)
    assert "Already sealed" in out.getvalue()


def test_an_unsigned_row_inserted_after_signing_began_is_never_sealed(three_events):
    seq = insert_forged()
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_seal", stdout=out)
    assert f"seq {seq}" in out.getvalue()
    assert not AuditEvent.objects.filter(verb="audit.sealed").exists()


def test_a_deleted_tail_past_a_checkpoint_is_found_by_audit_verify(three_events, settings, tmp_path):
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"
    call_command("audit_verify", stdout=io.StringIO(), stderr=io.StringIO())  # verifies and writes a checkpoint
    checkpointed = latest_checkpoint()["seq"]
    with maintenance(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE seq >= %s", [checkpointed - 1])
        cursor.execute("DELETE FROM audit_chainverification")  # the database's own record of runs, too
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--no-record", stdout=out, stderr=io.StringIO())
    assert f"BROKEN at seq {checkpointed - 1}: rows from seq {checkpointed - 1} on are gone" in out.getvalue()


def test_audit_verify_reports_the_newest_checkpoint(three_events, settings, tmp_path):
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"
    assert "No signed checkpoint yet" in verify_command()
    call_command("audit_verify", stdout=io.StringIO(), stderr=io.StringIO())
    assert "Newest signed checkpoint: seq" in verify_command()


def test_the_public_key_command_prints_what_to_pin(settings):
    out = io.StringIO()
    call_command("audit_public_key", stdout=out)
    key = signing.SigningKey.from_secret(settings.AUDIT_SIGNING_KEY)
    assert out.getvalue().split()[0] == key.public_text
    assert signing.parse_public_key(key.public_text).public_bytes_raw() == key.public.public_bytes_raw()
