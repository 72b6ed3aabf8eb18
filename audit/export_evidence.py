"""What an export carries to tie its rows to the transparency log: a checkpoint and one range proof.

At the end of an export (`audit.export.finish_export`) the manifest gains

- `checkpoint_note`: the newest checkpoint recorded at or before the export's chain head
  (the C2SP signed note, with the cosignature lines stored for it, as /audit/checkpoint
  serves it), or null when no checkpoint had been issued yet;
- `range_proof`: one `cp-audit-range-proof/1` proof (hitl_controlplane.range_proof) that
  the exported rows within that checkpoint's tree are leaves [start, end) of it: O(log n)
  stored subtree hashes, read in one query, no work per row;
- `range_proof_absent`: why there is none, when `range_proof` is null.

A proof needs the rows to be one contiguous seq run (an unfiltered export always is; a
filtered one when it happens to select a run). Other filtered exports carry none: a
multi-leaf proof needs the sorted set of every exported seq at the end (memory that grows
with the export, where the export keeps it flat) and, for a sparse filter, about
log2(n / rows) hashes per row anyway; each event's own inclusion proof is served at
/audit/tree/inclusion. Rows newer than the checkpoint are not in its tree: in an
unfiltered export they are chained to the last proven row, and the next checkpoint covers them.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from hitl_controlplane.manifest import ExportDigests
from hitl_controlplane.range_proof import RANGE_PROOF_TYPE

from . import tree
from .models import AuditEvent
from .notes import CHECKPOINT_VERB
from .witnesses import served_note

__all__ = ["evidence_fields"]


def _checkpoint_at(head_seq: int) -> tuple[int, str, int] | None:
    """(seq, note, tree size) of the newest checkpoint event at or before `head_seq`."""
    rows = AuditEvent.objects.filter(verb=CHECKPOINT_VERB, seq__lte=head_seq).order_by("-seq")
    for seq, metadata in rows.values_list("seq", "metadata")[:1]:
        return int(seq), str(metadata["note"]), int(metadata["tree_size"])
    return None


def _absent(note: str | None, reason: str) -> dict[str, Any]:
    return {"checkpoint_note": note, "range_proof": None, "range_proof_absent": reason}


def evidence_fields(head_seq: int, digests: ExportDigests) -> dict[str, Any]:
    """The manifest's checkpoint and proof members for an export of the rows `digests` summed up."""
    checkpoint = _checkpoint_at(head_seq)
    if checkpoint is None:
        return _absent(None, "no checkpoint had been issued when the export began")
    checkpoint_seq, note, tree_size = checkpoint
    try:
        note = served_note(checkpoint_seq, note)
    except ImproperlyConfigured:
        pass  # witnesses misconfigured: the log's own signature still stands (the system check reports it)
    first, last, count = digests.first_seq, digests.last_seq, digests.row_count
    if first is None or last is None:
        return _absent(note, "the export holds no rows")
    if first > tree_size:
        return _absent(note, f"every exported row is newer than the checkpoint's tree of {tree_size} events")
    if count != last - first + 1:
        return _absent(
            note,
            "a filtered export whose rows are not one contiguous seq run carries no proof: a multi-leaf "
            "proof would hold the whole seq list in memory and cost about log2(n / rows) hashes a row; "
            "each event's own inclusion proof is served at /audit/tree/inclusion",
        )
    start, end = first - 1, min(last, tree_size)
    left, consistency = tree.range_proof(start, end, tree_size)
    return {
        "checkpoint_note": note,
        "range_proof": {
            "type": RANGE_PROOF_TYPE,
            "start": start,
            "end": end,
            "tree_size": tree_size,
            "left": [node.hex() for node in left],
            "consistency": [node.hex() for node in consistency],
        },
    }
