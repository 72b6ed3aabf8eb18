"""Witnesses' cosignatures of the checkpoints: configured keys, receiving, serving, assurance.

`settings.AUDIT_WITNESSES` lists the witnesses' cosignature/v1 vkeys (what `hitl-witness
vkey` prints) and `settings.AUDIT_WITNESS_QUORUM` how many must cosign a checkpoint for it
to read `witnessed` (unset: a majority). A witness POSTs the checkpoint note with its
cosignature line (`hitl_controlplane.witness`); the line is kept only when its key is
configured, its signature verifies over a checkpoint this log issued, and its time is not
in the future. Each stored cosignature is recorded in the chain (`audit.cosigned`), and
`/audit/checkpoint` serves the newest note with the configured witnesses' lines appended
(C2SP signed-note: one more signature line each).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from hitl_controlplane.assurance import Assurance, assess, check_quorum, default_quorum
from hitl_controlplane.signed_note import COSIGNATURE_V1, NoteError, NoteKey, Signature, parse_checkpoint, split_note

from .chain import Actor, audited_atomic, record
from .models import AuditCosignature, AuditEvent
from .notes import CHECKPOINT_VERB, log_key

__all__ = [
    "COSIGNED_VERB",
    "CosignatureRefused",
    "Witnessing",
    "assurance_of",
    "configured",
    "receive",
    "served_note",
    "witness_panel",
]

COSIGNED_VERB = "audit.cosigned"
FUTURE_SLACK_SECONDS = 300  # a witness's clock may run this far ahead of ours


class CosignatureRefused(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Witnessing:
    witnesses: tuple[NoteKey, ...]
    quorum: int


def configured() -> Witnessing:
    """The configured witness keys and quorum; ImproperlyConfigured when they are unusable."""
    try:
        keys = tuple(NoteKey.parse_vkey(vkey) for vkey in settings.AUDIT_WITNESSES)
    except NoteError as exc:
        raise ImproperlyConfigured(f"AUDIT_WITNESSES holds a key that is not a vkey: {exc}") from exc
    if any(key.kind != COSIGNATURE_V1 for key in keys):
        raise ImproperlyConfigured("AUDIT_WITNESSES holds cosignature/v1 (type 0x04) vkeys only")
    if len({key.vkey for key in keys}) != len(keys):
        raise ImproperlyConfigured("AUDIT_WITNESSES names a witness twice")
    quorum = settings.AUDIT_WITNESS_QUORUM
    try:
        return Witnessing(keys, check_quorum(default_quorum(len(keys)) if quorum is None else quorum, len(keys)))
    except ValueError as exc:
        raise ImproperlyConfigured(f"AUDIT_WITNESS_QUORUM: {exc}") from exc


def _issued(size: int) -> tuple[int, str] | None:
    """(seq, note) of the checkpoint this log issued at tree size `size`, if any."""
    rows = AuditEvent.objects.filter(verb=CHECKPOINT_VERB, metadata__tree_size=size).values_list("seq", "metadata")
    for seq, metadata in rows.order_by("-seq")[:1]:
        return int(seq), str(metadata["note"])
    return None


def receive(text: str) -> list[tuple[AuditCosignature, bool]]:
    """Store the configured witnesses' valid cosignatures in `text` (a cosigned checkpoint note).

    Returns (row, stored now) per cosignature (one already stored is returned as it was,
    not recorded twice); raises CosignatureRefused with the error code otherwise.
    """
    try:
        body, signatures = split_note(text)
        checkpoint = parse_checkpoint(body)
    except NoteError as exc:
        raise CosignatureRefused("invalid_cosignature", f"Not a cosigned checkpoint note: {exc}") from None
    issued = _issued(checkpoint.size)
    if issued is None or split_note(issued[1])[0] != body:
        raise CosignatureRefused(
            "checkpoint_unknown", f"This log issued no checkpoint of size {checkpoint.size} with that root hash."
        )
    witnessing = configured()
    theirs: list[tuple[NoteKey, Signature]] = [
        (key, signature)
        for signature in signatures
        for key in witnessing.witnesses
        if (signature.name, signature.key_hash) == (key.name, key.key_hash)
    ]
    if not theirs:
        raise CosignatureRefused("witness_unknown", "No signature line on the note is from a configured witness.")
    for key, signature in theirs:
        if not key.verifies(body, signature):
            raise CosignatureRefused("invalid_cosignature", f"The cosignature of {key.name} does not verify.")
        if (signature.timestamp or 0) > time.time() + FUTURE_SLACK_SECONDS:
            raise CosignatureRefused("invalid_cosignature", f"The cosignature of {key.name} is dated in the future.")
    return [_store(issued[0], checkpoint.size, checkpoint.root_hash.hex(), key, signature) for key, signature in theirs]


def _store(
    checkpoint_seq: int, size: int, root_hex: str, key: NoteKey, signature: Signature
) -> tuple[AuditCosignature, bool]:
    with audited_atomic():
        row, created = AuditCosignature.objects.get_or_create(
            checkpoint_seq=checkpoint_seq,
            witness_vkey=key.vkey,
            defaults={
                "tree_size": size,
                "witness_name": key.name,
                "cosigned_at": signature.timestamp or 0,
                "line": signature.line,
                "received_at": timezone.now(),
            },
        )
        if created:
            record(
                COSIGNED_VERB,
                actor=Actor.system(f"witness {key.name}"),
                metadata={
                    "checkpoint_seq": checkpoint_seq,
                    "tree_size": size,
                    "root_hash": root_hex,
                    "witness": key.name,
                    "witness_vkey": key.vkey,
                    "cosigned_at": row.cosigned_at,
                },
            )
    return row, created


def served_note(checkpoint_seq: int, note: str, witnessing: Witnessing | None = None) -> str:
    """`note` with the stored cosignature lines of the configured witnesses appended, in configured order."""
    witnessing = witnessing or configured()
    order = [key.vkey for key in witnessing.witnesses]
    lines = dict(
        AuditCosignature.objects.filter(checkpoint_seq=checkpoint_seq, witness_vkey__in=order).values_list(
            "witness_vkey", "line"
        )
    )
    return note + "".join(lines[vkey] for vkey in order if vkey in lines)


def assurance_of(note: str, witnessing: Witnessing | None = None) -> Assurance:
    """The assurance of a served note under this server's log key and configured witnesses."""
    witnessing = witnessing or configured()
    return assess(note, NoteKey.parse_vkey(log_key().vkey), witnessing.witnesses, witnessing.quorum)


def newest_checkpoint() -> tuple[int, str, Any] | None:
    """(seq, note, occurred_at) of the newest checkpoint event."""
    rows = (
        AuditEvent.objects.filter(verb=CHECKPOINT_VERB).order_by("-seq").values_list("seq", "metadata", "occurred_at")
    )
    for seq, metadata, occurred_at in rows[:1]:
        return int(seq), str(metadata["note"]), occurred_at
    return None


def witness_panel() -> dict[str, Any] | None:
    """What the auditor page shows: the current checkpoint, its assurance and why, and each witness."""
    newest = newest_checkpoint()
    if newest is None:
        return None
    seq, note, issued_at = newest
    witnessing = configured()
    served = served_note(seq, note, witnessing)
    assurance = assurance_of(served, witnessing)
    checkpoint = parse_checkpoint(split_note(note)[0])
    vkeys = [key.vkey for key in witnessing.witnesses]
    # One indexed query per configured witness (a handful): its newest cosignature.
    latest = {
        vkey: AuditCosignature.objects.filter(witness_vkey=vkey).order_by("-checkpoint_seq").first() for vkey in vkeys
    }
    cosigned_at = dict(assurance.times)
    witnesses = [
        {
            "name": key.name,
            "vkey": key.vkey,
            "cosigned_at": cosigned_at.get(key.name),
            "newest": latest.get(key.vkey),
        }
        for key in witnessing.witnesses
    ]
    return {
        "seq": seq,
        "issued_at": issued_at,
        "tree_size": checkpoint.size,
        "root_hash": checkpoint.root_hash.hex(),
        "assurance": assurance,
        "witnesses": witnesses,
        "note": served,
    }
