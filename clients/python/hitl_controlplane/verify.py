"""Offline verifier for audit exports: `hitl-audit-verify FILE [options]`
(`python -m hitl_controlplane.verify`; in the server's tree `python -m audit.verify`).
This module is the command line; the checks are in `hitl_controlplane.export_checks`.

Imports nothing from Django or the server (only this package's canonical form,
manifest and Ed25519 modules), so an auditor can check an export without
trusting the server that produced it.

    python -m audit.verify export.jsonl --public-key ed25519:...
    python -m audit.verify export.csv --manifest export.csv.manifest.json --public-key-file server.pub
    python -m audit.verify export.jsonl --public-key ed25519:... --checkpoint checkpoint-000123.json

The public key is the server's audit signing key (`manage.py audit_public_key`),
pinned by the auditor from a server they trust; give several after a key rotation.
Files signed before Ed25519 (HMAC-SHA256) verify with that secret: --key-file.

What it checks:
  * every row: its hash recomputes as sha256(prev_hash || canonical), its
    canonical document names its seq, and its other columns say what the
    canonical document says; seqs strictly increase;
  * an unfiltered export (the manifest's filters are empty): the chain itself,
    contiguous from seq 1 at the genesis hash, each prev_hash linking to the
    previous row's hash, ending at the chain head the manifest names;
  * any export: the manifest (row count, first/last seq, digest of the seq list,
    digest of the row hashes) against the rows received, and the manifest's
    Ed25519 signature under a public key the auditor pinned;
  * with --checkpoint: the checkpoint's signature, and that the export agrees
    with the chain head recorded outside the database at that seq;
  * the export's own checkpoint note and range proof (hitl_controlplane.export_assurance):
    the proven rows' leaves recomputed and tied to the note's root, the note's log
    signature under the pinned log key (--log-vkey, or --public-key named by the note's
    origin), its cosignatures under the pinned witness keys (--witness-vkey,
    --witness-vkeys-file or HITL_AUDIT_WITNESS_VKEYS; --quorum, default a majority), and
    the assurance reached: `unsigned`, `signed` or `witnessed`. With witness keys pinned
    `witnessed` is required, else `signed` (--require says otherwise); short of it: FAILED.

    python -m audit.verify export.jsonl --public-key ed25519:... --witness-vkey w1+... --witness-vkey w2+...

Prints one line, "OK: ..." (exit 0) or "FAILED ...: reason" (exit 1), naming the
first bad seq where there is one. Exit 2 is a usage error.

It fails closed: without a key (--public-key, --public-key-file, or for older files
--key / --key-file) the signatures cannot be checked, and a rewritten chain is as
self-consistent as the real one, so the line is "UNVERIFIED: ..." and the exit is 3.
Only --no-signatures (an explicit "I know; check the structure only") turns that into
"OK: ... signatures NOT checked (--no-signatures)" with exit 0. A structural failure
is "FAILED" (exit 1) with or without a key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .ed25519 import parse_public_key
from .export_assurance import TreePins
from .export_checks import Verdict, load_checkpoint, verify_export
from .manifest import VerifyingKey
from .signed_note import NoteKey

__all__ = ["Verdict", "load_checkpoint", "main", "verify_export"]


KEY_ENVIRONMENT_VARIABLE = "AUDIT_EXPORT_SIGNING_KEY"
LOG_VKEY_VARIABLE = "HITL_AUDIT_LOG_VKEY"
WITNESS_VKEYS_VARIABLE = "HITL_AUDIT_WITNESS_VKEYS"  # whitespace-separated
QUORUM_VARIABLE = "HITL_AUDIT_WITNESS_QUORUM"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNVERIFIED = 0, 1, 2, 3


def _key_from(arguments: argparse.Namespace) -> VerifyingKey | None:
    if arguments.public_key or arguments.public_key_file:
        texts = list(arguments.public_key or [])
        if arguments.public_key_file:
            lines = Path(arguments.public_key_file).read_text(encoding="utf-8").splitlines()
            texts += [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]
        return [parse_public_key(text) for text in texts]
    if arguments.key_file:
        return Path(arguments.key_file).read_bytes().rstrip(b"\r\n")
    if arguments.key:
        return bytes(arguments.key.encode("utf-8"))
    from_environment = os.environ.get(KEY_ENVIRONMENT_VARIABLE)
    return from_environment.encode("utf-8") if from_environment else None


def _vkeys(texts: list[str]) -> tuple[NoteKey, ...]:
    return tuple(NoteKey.parse_vkey(text) for text in texts if text.strip())


def _pins_from(arguments: argparse.Namespace) -> TreePins:
    """The pinned log and witness keys: options first, else the environment."""
    log = list(arguments.log_vkey or []) or os.environ.get(LOG_VKEY_VARIABLE, "").split()
    witnesses = list(arguments.witness_vkey or [])
    if arguments.witness_vkeys_file:
        lines = Path(arguments.witness_vkeys_file).read_text(encoding="utf-8").splitlines()
        witnesses += [line.split("#", 1)[0].strip() for line in lines]
    if not witnesses:
        witnesses = os.environ.get(WITNESS_VKEYS_VARIABLE, "").split()
    quorum = arguments.quorum
    if quorum is None and os.environ.get(QUORUM_VARIABLE):
        quorum = int(os.environ[QUORUM_VARIABLE])
    return TreePins(_vkeys(log), _vkeys(witnesses), quorum, arguments.require)


def main(argv: list[str] | None = None, *, prog: str = "hitl-audit-verify") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Verify an audit export (CSV or JSON Lines) offline: chain, manifest, signature, checkpoint.",
    )
    parser.add_argument("file", help="the export file (.jsonl or .csv)")
    parser.add_argument("--manifest", help="the manifest sidecar (required for CSV; overrides a JSONL trailer)")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument(
        "--public-key", action="append", help="the server's audit public key, ed25519:... (repeat after a key rotation)"
    )
    keys.add_argument("--public-key-file", help="a file of public keys, one per line (# comments)")
    keys.add_argument("--key", help=f"older files: the HMAC signing key (or set {KEY_ENVIRONMENT_VARIABLE})")
    keys.add_argument("--key-file", help="older files: a file holding the HMAC signing key")
    keys.add_argument(
        "--no-signatures",
        action="store_true",
        help="check the structure only, knowing the signatures are not checked (else no key: exit 3)",
    )
    parser.add_argument("--checkpoint", help="a signed chain-head checkpoint file to check the export against")
    parser.add_argument("--format", choices=("csv", "jsonl"), help="default: from the file name or its first byte")
    tree = parser.add_argument_group("checkpoint and witnesses (the export's checkpoint_note and range_proof)")
    tree.add_argument(
        "--log-vkey",
        action="append",
        help=f"the log's note vkey (manage.py audit_checkpoint --vkey; or {LOG_VKEY_VARIABLE}); "
        "default: the --public-key named by the checkpoint's origin",
    )
    tree.add_argument(
        "--witness-vkey", action="append", help=f"a witness's cosignature vkey (repeat; or {WITNESS_VKEYS_VARIABLE})"
    )
    tree.add_argument("--witness-vkeys-file", help="a file of witness vkeys, one per line (# comments)")
    tree.add_argument(
        "--quorum", type=int, help=f"witnesses that must cosign (default a majority; or {QUORUM_VARIABLE})"
    )
    tree.add_argument(
        "--require",
        choices=("unsigned", "signed", "witnessed"),
        help="the assurance to reach, else FAILED (default: witnessed when witness keys are pinned, else signed)",
    )
    arguments = parser.parse_args(argv)

    try:
        key = _key_from(arguments)
        manifest = None
        if arguments.manifest:
            with open(arguments.manifest, encoding="utf-8") as handle:
                manifest = json.load(handle)
            if not isinstance(manifest, dict):
                raise ValueError("the manifest is not a JSON object")
        checkpoint = load_checkpoint(arguments.checkpoint) if arguments.checkpoint else None
        pins = _pins_from(arguments)
    except (OSError, ValueError) as exc:
        print(f"FAILED: {exc}")
        return EXIT_FAILED
    verdict = verify_export(
        arguments.file,
        manifest=manifest,
        key=key,
        checkpoint=checkpoint,
        fmt=arguments.format,
        no_signatures=arguments.no_signatures,
        pins=pins,
    )
    print(verdict.message)
    if verdict.ok:
        return EXIT_OK
    return EXIT_FAILED if verdict.message.startswith("FAILED") else EXIT_UNVERIFIED


if __name__ == "__main__":
    sys.exit(main())
