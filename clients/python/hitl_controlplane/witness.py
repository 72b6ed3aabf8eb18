"""A witness for the audit log's checkpoints: `hitl-witness` (`python -m hitl_controlplane.witness`).

A witness holds its own Ed25519 key (a cosignature/v1 key, in a key file only it reads)
and a state file: the size and root hash of the last checkpoint it cosigned. Each round
it fetches the newest checkpoint (`GET /audit/checkpoint`, public), checks the log's note
signature under the log vkey it pinned, and, when the tree grew, fetches the consistency
proof from its last cosigned size (`GET /audit/checkpoint/consistency?first=M&size=N`,
public) and checks it against the root it remembers, never against roots the server
states. Only then does it record the new size and root (atomically, before signing, so it
can never cosign two conflicting checkpoints) and POST its cosignature
(`POST /audit/checkpoint/cosignatures`, the note with its cosignature line).

A checkpoint that is smaller than the last cosigned one, has the same size and another
root, or fails the consistency proof means the log forked (its history was rewritten):
the witness refuses, prints so loudly on stderr, keeps the offending note next to its
state file as evidence, and exits 4. The first checkpoint it ever sees is trusted as is
(trust on first use), and it says so.

    hitl-witness init --key witness.key --name witness-a.example    # prints the vkey to configure
    hitl-witness vkey --key witness.key
    hitl-witness run --url https://cp.example --log-vkey 'cp.example/audit+...' \\
        --key witness.key --state witness.state [--once] [--interval 30]

Exit codes: 0 cosigned or nothing new (`--once`), 1 a round failed (network, server, a
note the pinned log key did not sign), 2 usage, 4 the log forked. Ed25519 is
`cryptography`'s; no Django.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from .merkle import verify_consistency
from .signed_note import COSIGNATURE_V1, ED25519, NoteError, NoteKey, join_note, parse_checkpoint, split_note

__all__ = ["Fork", "RoundFailed", "State", "create_key", "load_key", "main", "witness_once"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FORK = 0, 1, 2, 4


class RoundFailed(Exception):
    """This round could not cosign (network, server answer, a note not signed by the pinned key)."""


class Fork(Exception):
    """The log served a checkpoint inconsistent with the one this witness cosigned last."""

    def __init__(self, message: str, note: str) -> None:
        super().__init__(message)
        self.note = note


@dataclass(frozen=True)
class State:
    origin: str
    size: int
    root_hash: bytes

    @classmethod
    def load(cls, path: Path) -> State | None:
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(str(data["origin"]), int(data["size"]), bytes.fromhex(data["root_hash"]))

    def save(self, path: Path) -> None:
        """Write atomically (a temporary file in the same directory, fsync, rename): never half a state."""
        document = {"origin": self.origin, "size": self.size, "root_hash": self.root_hash.hex()}
        fd, temporary = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(document, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def create_key(path: Path, name: str) -> NoteKey:
    """Generate a cosignature/v1 key into a new file (mode 0600); refuses to overwrite one."""
    key = NoteKey.generate(name, COSIGNATURE_V1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key.private_text() + "\n")
    return key


def load_key(path: Path) -> NoteKey:
    key = NoteKey.parse_private(path.read_text(encoding="ascii"))
    if key.kind != COSIGNATURE_V1:
        raise NoteError("a witness key is a cosignature/v1 (type 0x04) key")
    return key


def _get(client: httpx.Client, url: str, **params: int) -> httpx.Response:
    try:
        response = client.get(url, params=params or None)
    except httpx.HTTPError as exc:
        raise RoundFailed(f"GET {url}: {exc}") from exc
    if response.status_code != 200:
        raise RoundFailed(f"GET {url}: HTTP {response.status_code} {response.text[:200]}")
    return response


def witness_once(
    client: httpx.Client, base_url: str, log_key: NoteKey, key: NoteKey, state_path: Path, *, now: int | None = None
) -> str:
    """One round: fetch, check, cosign, post. Returns what happened; raises Fork or RoundFailed."""
    base = base_url.rstrip("/")
    note = _get(client, f"{base}/audit/checkpoint").text
    try:
        body, signatures = split_note(note)
        checkpoint = parse_checkpoint(body)
    except NoteError as exc:
        raise RoundFailed(f"the log served something that is not a checkpoint note: {exc}") from exc
    log_signatures = [s for s in signatures if log_key.verifies(body, s)]
    if not log_signatures:
        raise RoundFailed(f"the checkpoint is not signed by the pinned log key {log_key.vkey}")
    if checkpoint.origin != log_key.name:
        raise RoundFailed(f"the checkpoint's origin {checkpoint.origin!r} is not the log's {log_key.name!r}")
    try:
        state = State.load(state_path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RoundFailed(f"the state file {state_path} is unreadable ({exc!r}); refusing to start over") from exc
    where = f"{checkpoint.origin} served size {checkpoint.size} root {checkpoint.root_hash.hex()}"
    if state is not None and state.origin != checkpoint.origin:
        raise RoundFailed(f"this state file belongs to the log {state.origin!r}, not {checkpoint.origin!r}")
    if state is not None and checkpoint.size < state.size:
        raise Fork(f"{where}, smaller than size {state.size} which this witness already cosigned (a rollback)", note)
    if state is not None and checkpoint.size == state.size and checkpoint.root_hash != state.root_hash:
        raise Fork(f"{where}, but this witness cosigned size {state.size} with root {state.root_hash.hex()}", note)
    if any(key.verifies(body, s) for s in signatures):
        if state is None:  # this witness cosigned it, so it is what this witness last vouched for
            State(checkpoint.origin, checkpoint.size, checkpoint.root_hash).save(state_path)
        return f"up to date: size {checkpoint.size} already carries this witness's cosignature"
    if state is not None and 0 < state.size < checkpoint.size:
        url = f"{base}/audit/checkpoint/consistency"
        answer = _get(client, url, first=state.size, size=checkpoint.size).json()
        try:
            proof = [bytes.fromhex(node) for node in answer["proof"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RoundFailed(f"the consistency proof is malformed: {exc}") from exc
        if not verify_consistency(state.size, checkpoint.size, state.root_hash, checkpoint.root_hash, proof):
            raise Fork(
                f"{where}, and its consistency proof does not tie it to size {state.size} root "
                f"{state.root_hash.hex()}, which this witness cosigned",
                note,
            )
    first_use = state is None
    State(checkpoint.origin, checkpoint.size, checkpoint.root_hash).save(state_path)  # before signing
    cosignature = key.sign(body, timestamp=int(time.time()) if now is None else now)
    _post(client, f"{base}/audit/checkpoint/cosignatures", join_note(body, [log_signatures[0], cosignature]))
    trusted = " (first checkpoint seen: trusted on first use)" if first_use else ""
    return f"cosigned size {checkpoint.size} root {checkpoint.root_hash.hex()}{trusted}"


def _post(client: httpx.Client, url: str, note: str) -> None:
    try:
        response = client.post(url, content=note.encode("utf-8"), headers={"Content-Type": "text/plain; charset=utf-8"})
    except httpx.HTTPError as exc:
        raise RoundFailed(f"POST {url}: {exc}") from exc
    if response.status_code not in (200, 201):
        raise RoundFailed(f"POST {url}: HTTP {response.status_code} {response.text[:300]}")


def _report_fork(fork: Fork, state_path: Path) -> None:
    evidence = state_path.with_name(f"{state_path.name}.fork-{int(time.time())}.note")
    evidence.write_text(fork.note, encoding="utf-8")
    banner = "!" * 72
    print(
        f"{banner}\nLOG FORKED: {fork}.\nThis witness refuses to cosign it. The offending checkpoint is kept in "
        f"{evidence}; the state file {state_path} still holds what was cosigned.\n{banner}",
        file=sys.stderr,
        flush=True,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hitl-witness", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="generate this witness's key file and print its vkey")
    init.add_argument("--key", type=Path, required=True)
    init.add_argument("--name", required=True, help="the witness's name, e.g. witness-a.example.com")
    vkey = commands.add_parser("vkey", help="print the vkey of an existing key file")
    vkey.add_argument("--key", type=Path, required=True)
    run = commands.add_parser("run", help="cosign the log's checkpoints, round after round")
    run.add_argument("--url", required=True, help="the control plane's base URL")
    run.add_argument("--log-vkey", required=True, help="the log's verifier key (manage.py audit_checkpoint --vkey)")
    run.add_argument("--key", type=Path, required=True)
    run.add_argument("--state", type=Path, required=True)
    run.add_argument("--once", action="store_true", help="one round, then exit")
    run.add_argument("--interval", type=float, default=30.0, help="seconds between rounds (default 30)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "init":
            print(create_key(args.key, args.name).vkey)
            return EXIT_OK
        key = load_key(args.key)
        if args.command == "vkey":
            print(key.vkey)
            return EXIT_OK
        log_key = NoteKey.parse_vkey(args.log_vkey)
        if log_key.kind != ED25519:
            raise NoteError("the log vkey is an Ed25519 note key (type 0x01)")
    except (OSError, NoteError, ValueError) as exc:
        print(f"hitl-witness: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with httpx.Client(timeout=15.0) as client:
        while True:
            try:
                print(witness_once(client, args.url, log_key, key, args.state), flush=True)
                outcome = EXIT_OK
            except Fork as fork:
                _report_fork(fork, args.state)
                return EXIT_FORK
            except RoundFailed as exc:
                print(f"hitl-witness: {exc}", file=sys.stderr, flush=True)
                outcome = EXIT_FAILED
            if args.once:
                return outcome
            time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
