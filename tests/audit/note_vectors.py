"""The signed-note and cosignature vectors of docs/vectors/notes.json, rebuilt from their fixed seeds.

Ed25519 (RFC 8032) is deterministic, so the same seeds, bodies and times give the same
bytes: `build()` is what the file must hold, and `python -m tests.audit.note_vectors`
rewrites it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hitl_controlplane.signed_note import COSIGNATURE_V1, ED25519, NoteKey, checkpoint_body, join_note

PATH = Path(__file__).resolve().parents[2] / "docs/vectors/notes.json"


def _key(name: str, kind: int) -> NoteKey:
    seed = hashlib.sha256(f"hitl-controlplane test vector {name}".encode()).digest()
    return NoteKey.from_private(name, kind, Ed25519PrivateKey.from_private_bytes(seed))


def build() -> dict[str, Any]:
    log = _key("controlplane.example/audit", ED25519)
    witnesses = [_key("witness.example/w1", COSIGNATURE_V1), _key("witness.example/w2", COSIGNATURE_V1)]
    root = hashlib.sha256(b"\x01" + bytes(64)).digest()
    body = checkpoint_body(log.name, 42, root)
    times = [1764806400, 1764806401]
    signatures = [log.sign(body), *(w.sign(body, t) for w, t in zip(witnesses, times, strict=True))]
    return {
        "description": "C2SP signed-note checkpoint signed by the log key and cosigned (cosignature/v1) by two "
        "witnesses. Private keys are Ed25519 seeds SHA-256('hitl-controlplane test vector ' + name): test keys only.",
        "log": {"name": log.name, "seed": _seed(log), "vkey": log.vkey, "key_hash": log.key_hash.hex()},
        "witnesses": [
            {"name": w.name, "seed": _seed(w), "vkey": w.vkey, "key_hash": w.key_hash.hex(), "time": t}
            for w, t in zip(witnesses, times, strict=True)
        ],
        "checkpoint": {"origin": log.name, "tree_size": 42, "root_hash": root.hex(), "body": body},
        "cosigned_messages": [f"cosignature/v1\ntime {t}\n{body}" for t in times],
        "note": join_note(body, signatures),
    }


def _seed(key: NoteKey) -> str:
    assert key.private is not None
    return key.private.private_bytes_raw().hex()


if __name__ == "__main__":
    PATH.write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
