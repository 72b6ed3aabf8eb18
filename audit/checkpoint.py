"""Signed chain-head checkpoints, written outside the database.

A checkpoint is a small JSON file in settings.AUDIT_CHECKPOINT_DIR:

    {"type": "cp-audit-checkpoint/1", "seq": 1234, "hash": "...",
     "time": "2026-01-31T09:00:00.000000Z", "signature": {"alg": "Ed25519", ...}}

signed with the server's audit key (audit.signing; see hitl_controlplane.manifest.sign). Someone
who can rewrite the database (a superuser) can rebuild a consistent chain, but
cannot change files already copied elsewhere nor sign new ones without the key:
the checkpoint pins what seq N's hash was at that time. Ship the directory to
storage the database's administrators cannot write (object storage with
retention, another host), and hand auditors the files.

Only pure-Python helpers live in hitl_controlplane.manifest; this module is the server side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from hitl_controlplane.canonical import format_timestamp
from hitl_controlplane.manifest import CHECKPOINT_TYPE, sign, signature_problem

from .signing import signer, trusted_public_keys

__all__ = ["checkpoint_dir", "latest_checkpoint", "read_checkpoints", "write_checkpoint"]

_PREFIX = "checkpoint-"


def checkpoint_dir() -> Path:
    return Path(settings.AUDIT_CHECKPOINT_DIR)


def write_checkpoint(seq: int, row_hash: str) -> Path:
    """Sign (seq, hash, now) and write it atomically as checkpoint-<seq>.json; returns the path.

    The caller must have verified the chain up to `seq` first: a checkpoint
    vouches for the chain it anchors. Rewriting the same seq replaces the file
    with an identical seq/hash and a newer time.
    """
    directory = checkpoint_dir()
    directory.mkdir(parents=True, exist_ok=True)
    document = sign(
        {"type": CHECKPOINT_TYPE, "seq": seq, "hash": row_hash, "time": format_timestamp(timezone.now())},
        signer().current,
    )
    path = directory / f"{_PREFIX}{seq:012d}.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(document, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)  # atomic: a reader never sees half a checkpoint
    return path


def read_checkpoints(limit: int | None = None) -> list[dict[str, Any]]:
    """Checkpoints whose signature holds under a trusted key, newest (highest seq) first.

    Files that are unreadable or badly signed are returned too, with a `problem`
    member, so the verifier can report them instead of silently skipping them.
    """
    directory = checkpoint_dir()
    if not directory.is_dir():
        return []
    trusted = trusted_public_keys()
    paths = sorted(directory.glob(f"{_PREFIX}*.json"), reverse=True)
    if limit is not None:
        paths = paths[:limit]
    checkpoints = []
    for path in paths:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            checkpoints.append({"file": path.name, "problem": f"unreadable: {exc}"})
            continue
        if not isinstance(document, dict):
            checkpoints.append({"file": path.name, "problem": "not a JSON object"})
            continue
        problem = signature_problem(document, trusted)
        if document.get("type") != CHECKPOINT_TYPE or not isinstance(document.get("seq"), int):
            problem = problem or "not a checkpoint document"
        checkpoints.append({**document, "file": path.name, **({"problem": problem} if problem else {})})
    return checkpoints


def latest_checkpoint() -> dict[str, Any] | None:
    found = read_checkpoints(limit=1)
    return found[0] if found else None
