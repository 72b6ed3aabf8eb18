"""C2SP signed-note checkpoints of the audit tree, recorded in the chain and served at /audit/checkpoint.

A checkpoint is the note `hitl_controlplane.signed_note` builds: the origin line
(`settings.AUDIT_LOG_ORIGIN`, the deployment's name, also the key name), the tree size
and the base64 root hash, signed as a note signature (type 0x01) by the audit Ed25519
key. Issuing one appends `audit.checkpoint`, whose metadata holds the note, so the chain
itself records every checkpoint and the newest one is read back from it.

`/audit/checkpoint` (audit.witness_views) serves the newest note with the witnesses'
cosignatures (audit.witnesses) and needs no login: a checkpoint holds the number of audit
events and a root hash, nothing else, and witnesses and outside auditors must fetch it.
"""

from __future__ import annotations

from django.conf import settings

from hitl_controlplane.signed_note import ED25519, NoteKey, checkpoint_body, join_note

from . import tree
from .chain import Actor, audited_atomic, record
from .models import AuditEvent
from .signing import signer

__all__ = ["CHECKPOINT_VERB", "checkpoint_if_grown", "issue_checkpoint", "log_key", "newest_note"]

CHECKPOINT_VERB = "audit.checkpoint"


def log_key() -> NoteKey:
    """The audit signing key as a note key named for the log's origin (its vkey is what witnesses pin)."""
    return NoteKey.from_private(settings.AUDIT_LOG_ORIGIN, ED25519, signer().current.private)


def issue_checkpoint() -> str:
    """Sign the tree's current size and root as a note, record it in the chain, and return the note."""
    key = log_key()
    with audited_atomic():
        size = tree.size()
        root_hash = tree.root(size)
        body = checkpoint_body(key.name, size, root_hash)
        note = join_note(body, [key.sign(body)])
        record(
            CHECKPOINT_VERB,
            actor=Actor.system("audit_checkpoint"),
            metadata={"tree_size": size, "root_hash": root_hash.hex(), "log_vkey": key.vkey, "note": note},
        )
    return note


def checkpoint_if_grown(quiet_verbs: tuple[str, ...] = (CHECKPOINT_VERB, "audit.cosigned")) -> str | None:
    """Issue a checkpoint when anything but checkpoints and cosignatures was appended since the newest one.

    So a periodic checkpoint of an idle log adds nothing (its own events and the witnesses'
    would otherwise grow the tree forever). Returns the note issued, or None.
    """
    newest = AuditEvent.objects.filter(verb=CHECKPOINT_VERB).order_by("-seq").values_list("seq", flat=True).first()
    grown = AuditEvent.objects.filter(seq__gt=newest or 0).exclude(verb__in=quiet_verbs).exists()
    return issue_checkpoint() if grown else None


def newest_note() -> str | None:
    metadata = AuditEvent.objects.filter(verb=CHECKPOINT_VERB).order_by("-seq").values_list("metadata", flat=True)
    newest = metadata.first()
    return str(newest["note"]) if isinstance(newest, dict) and "note" in newest else None
