"""The append-only, hash-chained audit log.

Rows are written only by `audit.chain` (record / audited_atomic), which assigns
seq, prev_hash and hash under a lock. This model refuses every other write path in
Python; database triggers (audit.db) refuse UPDATE, DELETE and TRUNCATE below it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from django.core.exceptions import ValidationError
from django.db import models

from .vocabulary import is_registered

__all__ = ["ActorKind", "AppendOnlyError", "AuditCosignature", "AuditEvent", "AuditTreeNode", "ChainVerification"]


class AppendOnlyError(Exception):
    """Raised on any attempt to change or remove audit rows, or to add them off the chain."""


class ActorKind(models.TextChoices):
    USER = "user", "User"
    AGENT = "agent", "Agent"
    SYSTEM = "system", "System"


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    """A queryset that can read and append, never change or remove."""

    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("audit events cannot be updated")

    def delete(self) -> NoReturn:
        raise AppendOnlyError("audit events cannot be deleted")

    def bulk_update(self, objs: Iterable[Any], fields: Any, batch_size: int | None = None) -> NoReturn:
        raise AppendOnlyError("audit events cannot be updated")

    def bulk_create(self, objs: Iterable[Any], *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("append audit events with audit.chain.record(), which chains them")

    def _append_chained(self, events: list[AuditEvent]) -> list[AuditEvent]:
        """Insert events already chained by audit.chain; nothing else may call this."""
        return super().bulk_create(events)


AuditEventManager = models.Manager.from_queryset(AuditEventQuerySet)


class AuditEvent(models.Model):
    """One audit event: who did what to which request, chained to the previous event.

    `request_id` and `agent_id` are plain columns, not foreign keys, so deleting a
    request or agent never cascades here; `actor_label` is copied for the same
    reason. `canonical` holds the exact text that was hashed.
    """

    seq = models.BigIntegerField(primary_key=True)
    occurred_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=16, choices=ActorKind.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=255)
    verb = models.CharField(max_length=64)
    request_id = models.UUIDField(null=True, blank=True, db_index=True)
    agent_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    metadata = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)
    canonical = models.TextField()
    # Ed25519 over `hash` by the key `key_id` names (audit/signing.py); empty only on
    # rows written before signing began, which `audit_seal` covers.
    key_id = models.CharField(max_length=16, blank=True, default="")
    signature = models.CharField(max_length=100, blank=True, default="")

    objects = AuditEventManager()

    class Meta:
        ordering = ["seq"]
        indexes = [
            models.Index(fields=["verb", "occurred_at"], name="audit_event_verb_time_idx"),
            models.Index(fields=["occurred_at"], name="audit_event_time_idx"),
        ]
        # Reading is the only thing anyone may do; the admin shows rows read-only.
        default_permissions = ("view",)
        permissions = [("export_auditevent", "Can export audit events")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.verb} by {self.actor_label}"

    def save(self, *args: Any, **kwargs: Any) -> NoReturn:
        if not self._state.adding:
            raise AppendOnlyError(f"audit event #{self.seq} cannot be changed")
        if not is_registered(self.verb):
            raise ValueError(f"{self.verb!r} is not a registered audit verb")
        raise AppendOnlyError("append audit events with audit.chain.record(), which chains them")

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError(f"audit event #{self.seq} cannot be deleted")

    def clean(self) -> None:
        if not is_registered(self.verb):
            raise ValidationError({"verb": f"{self.verb!r} is not a registered audit verb"})


class ChainVerification(models.Model):
    """One run of chain verification (scheduled or manual) and its outcome.

    Not part of the chain: a record of when the chain was last checked, for the
    auditors' status panel. The chain itself also gets an `audit.verified` or
    `audit.chain_broken` event for each run.
    """

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    from_seq = models.BigIntegerField(help_text="First seq checked; 1 for a full run.")
    head_seq = models.BigIntegerField(help_text="Last seq that passed.")
    head_hash = models.CharField(max_length=64, blank=True)
    checked = models.BigIntegerField(default=0)
    ok = models.BooleanField()
    bad_seq = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    full = models.BooleanField(default=False, help_text="Walked from seq 1 rather than from the last good head.")
    trigger = models.CharField(max_length=32, default="scheduled")
    checkpoint_file = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-finished_at", "-pk"]
        default_permissions = ("view",)
        get_latest_by = "finished_at"

    def __str__(self) -> str:
        outcome = "ok" if self.ok else f"broken at {self.bad_seq}"
        return f"verification {self.from_seq}-{self.head_seq} {outcome}"


class AuditTreeNode(models.Model):
    """The Merkle subtrees completed by one event's leaf (audit.tree): derived from the chain, not evidence.

    `hashes` is the hex of the subtree hashes of levels 0..tz(seq) that end at leaf `seq`
    (tz: trailing zero bits of seq), level 0 (the leaf hash) first, 64 digits each.
    """

    seq = models.BigIntegerField(primary_key=True)
    hashes = models.TextField()

    class Meta:
        ordering = ["seq"]
        default_permissions = ("view",)

    def __str__(self) -> str:
        return f"tree row {self.seq}"


class AuditCosignature(models.Model):
    """A configured witness's cosignature/v1 of one checkpoint (audit.witnesses): served with the note.

    `checkpoint_seq` is the seq of the `audit.checkpoint` event that issued the note (a
    plain column, as elsewhere here); `line` is the exact signature line, as served.
    """

    checkpoint_seq = models.BigIntegerField()
    tree_size = models.BigIntegerField()
    witness_name = models.CharField(max_length=255)
    witness_vkey = models.CharField(max_length=400)
    cosigned_at = models.BigIntegerField(help_text="The cosignature's own time, Unix seconds.")
    line = models.TextField()
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["checkpoint_seq", "pk"]
        default_permissions = ("view",)
        constraints = [
            models.UniqueConstraint(fields=["witness_vkey", "checkpoint_seq"], name="audit_one_cosignature_per_witness")
        ]

    def __str__(self) -> str:
        return f"{self.witness_name} cosigned size {self.tree_size}"
