"""Events are buffered during a transaction and chained as its last step."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test.utils import override_settings

from audit.chain import Actor, audited_atomic, digest, head, record, verify_chain
from audit.models import AuditEvent
from hitl_controlplane.canonical import GENESIS_HASH, canonical_bytes


class Boom(Exception):
    pass


def chain_rows() -> list[tuple[int, str, str, str]]:
    return list(AuditEvent.objects.values_list("seq", "verb", "prev_hash", "hash"))


def assert_linked(rows: list[tuple[int, str, str, str]]) -> None:
    assert [seq for seq, *_ in rows] == list(range(1, len(rows) + 1))
    previous = GENESIS_HASH
    for _seq, _verb, prev_hash, digest_ in rows:
        assert prev_hash == previous
        previous = digest_


@pytest.mark.django_db
def test_an_empty_log_has_the_genesis_head():
    assert head() == (0, GENESIS_HASH)


@pytest.mark.django_db
def test_several_blocks_give_contiguous_linked_seqs(alice, refund_request, system):
    with audited_atomic():
        record("request.submitted", actor=Actor.for_user(alice), request=refund_request)
        record("request.queued", actor=system, request=refund_request)
    with audited_atomic():
        record("decision.recorded", actor=Actor.for_user(alice), request=refund_request)
        record("request.approved", actor=system, request=refund_request)
    with audited_atomic():
        record("request.execution_claimed", actor=system, request=refund_request)

    rows = chain_rows()
    assert [verb for _, verb, *_ in rows] == [
        "request.submitted",
        "request.queued",
        "decision.recorded",
        "request.approved",
        "request.execution_claimed",
    ]
    assert_linked(rows)
    assert head() == (5, rows[-1][3])
    assert verify_chain().ok


@pytest.mark.django_db
def test_record_buffers_until_the_block_ends(system):
    with audited_atomic():
        record("policy.changed", actor=system)
        assert not AuditEvent.objects.exists()
    assert AuditEvent.objects.count() == 1


@pytest.mark.django_db
def test_a_rolled_back_block_leaves_no_event_and_no_gap(system):
    record("policy.changed", actor=system)
    with pytest.raises(Boom), audited_atomic():
        record("emergency_stop.changed", actor=system, metadata={"on": True})
        raise Boom
    record("policy.changed", actor=system)

    rows = chain_rows()
    assert [verb for _, verb, *_ in rows] == ["policy.changed", "policy.changed"]
    assert_linked(rows)


@pytest.mark.django_db
def test_nested_blocks_append_once_at_the_outer_end(system):
    with audited_atomic():
        record("request.submitted", actor=system)
        with audited_atomic():
            record("request.queued", actor=system)
        assert not AuditEvent.objects.exists()
        record("request.approved", actor=system)
    assert [verb for _, verb, *_ in chain_rows()] == ["request.submitted", "request.queued", "request.approved"]


@pytest.mark.django_db
def test_a_failed_nested_block_drops_only_its_own_events(system):
    with audited_atomic():
        record("request.submitted", actor=system)
        with pytest.raises(Boom), audited_atomic():
            record("request.revised", actor=system)
            raise Boom
        record("request.queued", actor=system)
    rows = chain_rows()
    assert [verb for _, verb, *_ in rows] == ["request.submitted", "request.queued"]
    assert_linked(rows)


@pytest.mark.django_db
def test_the_append_is_one_insert_after_reading_the_head(system, django_assert_max_num_queries):
    # SAVEPOINT/RELEASE (the test runs inside a transaction), maybe the advisory
    # lock, one head read, one INSERT for all ten events.
    with django_assert_max_num_queries(5), audited_atomic():
        for _ in range(10):
            record("request.submitted", actor=system)
    assert AuditEvent.objects.count() == 10


@pytest.mark.django_db
def test_record_outside_a_block_appends_immediately(alice, mail_bot, refund_request):
    record("agent.created", actor=Actor.for_user(alice), agent=mail_bot, metadata={"name": "mail-bot"})
    event = AuditEvent.objects.get()
    assert (event.seq, event.verb, event.agent_id, event.request_id) == (1, "agent.created", 7, None)
    assert (event.actor_kind, event.actor_id, event.actor_label) == ("user", str(alice.pk), "alice")


@pytest.mark.django_db
def test_the_agent_defaults_to_the_requests_agent(refund_request, mail_bot):
    record("request.submitted", actor=Actor.for_agent(mail_bot), request=refund_request)
    event = AuditEvent.objects.get()
    assert (event.request_id, event.agent_id) == (refund_request.pk, mail_bot.pk)
    assert (event.actor_kind, event.actor_id, event.actor_label) == ("agent", "7", "mail-bot")


@pytest.mark.django_db
def test_the_actor_label_outlives_the_user(alice):
    record("policy.changed", actor=Actor.for_user(alice))
    alice.delete()
    assert AuditEvent.objects.get().actor_label == "alice"


@pytest.mark.django_db
def test_metadata_with_floats_is_refused_at_record_time(system):
    with audited_atomic():
        with pytest.raises(TypeError, match="float"):
            record("policy.changed", actor=system, metadata={"threshold": 0.5})
        record("policy.changed", actor=system, metadata={"threshold": "0.5"})
    assert AuditEvent.objects.get().metadata == {"threshold": "0.5"}


@pytest.mark.django_db
def test_metadata_is_copied_when_recorded(system):
    changes = {"rules": ["a"]}
    with audited_atomic():
        record("policy.changed", actor=system, metadata=changes)
        changes["rules"].append("b")
    assert AuditEvent.objects.get().metadata == {"rules": ["a"]}


def test_an_actor_needs_a_known_kind_and_a_label():
    with pytest.raises(ValueError):
        Actor(kind="robot", id="1", label="r2")
    with pytest.raises(ValueError):
        Actor(kind="system", id="", label="")


@override_settings(AUDIT_HMAC_KEY="test-key")
def test_digest_is_a_keyed_hmac_of_the_canonical_bytes_with_its_size():
    import hashlib
    import hmac

    body = {"to": "bob@example.com", "subject": "Invoice"}
    encoded = canonical_bytes(body)
    assert digest(body) == {
        "hmac": hmac.new(b"test-key", encoded, hashlib.sha256).hexdigest(),
        "size": len(encoded),
    }
    with override_settings(AUDIT_HMAC_KEY="other-key"):
        assert digest(body)["hmac"] != hmac.new(b"test-key", encoded, hashlib.sha256).hexdigest()


@pytest.mark.django_db
def test_audited_atomic_is_a_real_transaction(system, django_user_model):
    with pytest.raises(Boom), audited_atomic():
        django_user_model.objects.create_user(username="bob")
        record("policy.changed", actor=system)
        raise Boom
    assert not django_user_model.objects.filter(username="bob").exists()
    assert not AuditEvent.objects.exists()
    with audited_atomic():
        assert transaction.get_connection().in_atomic_block


@pytest.mark.django_db
def test_a_block_marked_for_rollback_appends_nothing(system):
    with audited_atomic():
        record("policy.changed", actor=system)
        transaction.set_rollback(True)
    assert not AuditEvent.objects.exists()
    record("policy.changed", actor=system)
    assert AuditEvent.objects.get().seq == 1
