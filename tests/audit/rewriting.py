"""What a database superuser could do: rewrite history and rebuild the chain consistently."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection

from audit.db import maintenance
from audit.models import AuditEvent
from hitl_controlplane.canonical import canonical_bytes, chain_hash, event_document, format_timestamp


def rewrite_chain_consistently(*, from_seq: int, change: dict[str, Any]) -> None:
    """Merge `change` into seq `from_seq`'s metadata and re-chain every later row, so the chain verifies."""
    rows = list(AuditEvent.objects.filter(seq__gte=from_seq).order_by("seq"))
    prev_hash = AuditEvent.objects.get(seq=from_seq - 1).hash if from_seq > 1 else "0" * 64
    with maintenance(), connection.cursor() as cursor:
        for row in rows:
            metadata = {**row.metadata, **change} if row.seq == from_seq else row.metadata
            canonical = canonical_bytes(
                event_document(
                    seq=row.seq,
                    occurred_at=format_timestamp(row.occurred_at),
                    actor_kind=row.actor_kind,
                    actor_id=row.actor_id,
                    actor_label=row.actor_label,
                    verb=row.verb,
                    request_id=None if row.request_id is None else str(row.request_id),
                    agent_id=row.agent_id,
                    metadata=metadata,
                )
            )
            row_hash = chain_hash(prev_hash, canonical)
            cursor.execute(
                f"UPDATE {AuditEvent._meta.db_table} SET metadata = %s, canonical = %s, prev_hash = %s, hash = %s "
                "WHERE seq = %s",
                [json.dumps(metadata), canonical.decode(), prev_hash, row_hash, row.seq],
            )
            prev_hash = row_hash


def fork_history(*, from_seq: int, change: dict[str, Any]) -> None:
    """The operator's fork: rewrite seq `from_seq`, re-chain, re-sign every later row with the real key, rebuild the tree.

    Everything the operator holds is used (the database and the audit signing key), so the
    forked log verifies on its own; only what was seen outside (a witness's state) differs.
    """
    from audit import tree
    from audit.models import AuditTreeNode
    from audit.signing import signer

    rewrite_chain_consistently(from_seq=from_seq, change=change)
    key = signer().current
    rows = list(AuditEvent.objects.filter(seq__gte=from_seq).values_list("seq", "hash"))
    with maintenance(), connection.cursor() as cursor:
        for seq, row_hash in rows:
            cursor.execute(
                f"UPDATE {AuditEvent._meta.db_table} SET key_id = %s, signature = %s WHERE seq = %s",
                [key.key_id, key.sign(row_hash), seq],
            )
        cursor.execute(f"DELETE FROM {AuditTreeNode._meta.db_table}")
    tree._last_edge = None
    tree.catch_up()
