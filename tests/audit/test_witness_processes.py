"""Two witnesses as separate processes against a real daphne: quorum reached, one stopped, both
stopped; a forked log refused by the witness command; the cosigned note opened by Go.

Each witness is the client distribution's command (`python -m hitl_controlplane.witness`,
installed as `hitl-witness`), with its own key file and state file; the server is daphne
on the test database, configured with both witnesses' vkeys and a quorum of one.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from audit import notes, witnesses
from hitl_controlplane.assurance import SIGNED, WITNESSED
from hitl_controlplane.signed_note import NoteError, split_note
from tests.live import DaphneServer, child_environment, stop_process

from .rewriting import fork_history
from .test_merkle_go import gotlog, run  # noqa: F401  (gotlog is a fixture)
from .witnessing import append_and_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WITNESS = [sys.executable, "-m", "hitl_controlplane.witness"]


def make_witness(tmp_path: Path, name: str) -> tuple[Path, str]:
    key = tmp_path / f"{name}.key"
    made = subprocess.run([*WITNESS, "init", "--key", str(key), "--name", name], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    again = subprocess.run([*WITNESS, "init", "--key", str(key), "--name", name], capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr, "a key file is never overwritten"
    return key, made.stdout.strip()


@pytest.fixture
def witness_processes_keys(tmp_path, settings) -> tuple[dict[str, Path], list[str]]:
    keys, vkeys = {}, []
    for name in ("witness-a.example", "witness-b.example"):
        keys[name], vkey = make_witness(tmp_path, name)
        vkeys.append(vkey)
    settings.AUDIT_WITNESSES = vkeys
    settings.AUDIT_WITNESS_QUORUM = 1
    return keys, vkeys


@pytest.fixture
def witnessed_server(witness_processes_keys) -> Iterator[DaphneServer]:
    _, vkeys = witness_processes_keys
    daphne = DaphneServer(env=child_environment(AUDIT_WITNESSES=" ".join(vkeys), AUDIT_WITNESS_QUORUM="1"))
    yield daphne
    daphne.stop()


def witness_command(witnessed_server: DaphneServer, key: Path, *more: str) -> list[str]:
    state = key.with_suffix(".state")
    url, log_vkey = witnessed_server.url, notes.log_key().vkey
    return [*WITNESS, "run", "--url", url, "--log-vkey", log_vkey, "--key", str(key), "--state", str(state), *more]


@pytest.fixture
def start_witness(witnessed_server) -> Iterator[Callable[[Path], subprocess.Popen]]:
    started: list[subprocess.Popen] = []

    def start(key: Path) -> subprocess.Popen:
        log = open(key.with_suffix(".log"), "wb")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(witness_command(witnessed_server, key, "--interval", "0.3"), stdout=log, stderr=log)
        started.append(process)
        return process

    yield start
    for process in started:
        stop_process(process)


def served(witnessed_server: DaphneServer) -> str:
    import httpx

    return httpx.get(f"{witnessed_server.url}/audit/checkpoint", timeout=10).text


def until_cosigned_by(witnessed_server: DaphneServer, names: set[str], timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        note = served(witnessed_server)
        try:
            if {s.name for s in split_note(note)[1]} >= names:
                return note
        except NoteError:  # no checkpoint issued yet: a JSON 404
            pass
        time.sleep(0.2)
    raise AssertionError(f"not cosigned by {names} within {timeout}s: {note!r}")


def test_two_witness_processes_reach_quorum_then_one_then_none(
    witnessed_server, witness_processes_keys, start_witness, gotlog, auditor_ann
):  # noqa: F811
    keys, vkeys = witness_processes_keys
    a, b = "witness-a.example", "witness-b.example"
    append_and_checkpoint()
    first_a, first_b = start_witness(keys[a]), start_witness(keys[b])
    note = until_cosigned_by(witnessed_server, {a, b})
    both = witnesses.assurance_of(note)
    assert (both.level, both.cosigned) == (WITNESSED, (a, b))
    # Go's sumdb/note opens the served note: the log's signature with note.NewVerifier, the
    # cosignature/v1 lines with crypto/ed25519 (x/mod's note does not know type 0x04).
    opened = run(
        gotlog,
        {
            "records": [],
            "sizes": [],
            "checks": [],
            "notes": [{"text": note, "verifiers": [notes.log_key().vkey], "cosigners": vkeys}],
        },
    )
    assert opened["notes"][0] == {"verified": [notes.log_key().name, a, b], "error": ""}

    stop_process(first_a)
    append_and_checkpoint(4)
    note = until_cosigned_by(witnessed_server, {b})
    one = witnesses.assurance_of(note)
    assert (one.level, one.cosigned, one.missing) == (WITNESSED, (b,), (a,)), "a quorum of one is still reached"

    stop_process(first_b)
    append_and_checkpoint(2)
    time.sleep(1.0)  # a witness that was still running would have cosigned by now
    none = witnesses.assurance_of(served(witnessed_server))
    assert none.level == SIGNED
    assert none.reason == f"only 0 of 2 pinned witnesses cosigned it (quorum 1); no valid cosignature from {a}, {b}"
    from django.test import Client

    auditor = Client()
    auditor.force_login(auditor_ann)
    page = auditor.get("/audit/").content.decode()
    assert "<strong>signed</strong>" in page and f"Signed by the log key only: {none.reason}." in page
    assert page.count("has not cosigned this checkpoint") == 2


def test_the_witness_command_refuses_a_forked_log_and_says_so(witnessed_server, witness_processes_keys):
    keys, _ = witness_processes_keys
    key = keys["witness-a.example"]
    append_and_checkpoint()
    once = subprocess.run(witness_command(witnessed_server, key, "--once"), capture_output=True, text=True, timeout=60)
    assert once.returncode == 0 and once.stdout.startswith("cosigned size 3"), once.stderr
    state_before = key.with_suffix(".state").read_text()

    fork_history(from_seq=2, change={"n": 99})  # rewritten and re-signed with the real key
    append_and_checkpoint(2)
    forked = subprocess.run(
        witness_command(witnessed_server, key, "--once"), capture_output=True, text=True, timeout=60
    )
    assert forked.returncode == 4, (forked.stdout, forked.stderr)
    assert "LOG FORKED" in forked.stderr and "refuses to cosign" in forked.stderr
    assert key.with_suffix(".state").read_text() == state_before
    evidence = list(key.parent.glob("witness-a.example.state.fork-*.note"))
    assert len(evidence) == 1 and evidence[0].read_text() == served(witnessed_server)
    assert witnesses.assurance_of(served(witnessed_server)).level == SIGNED


def test_the_local_witness_make_run_starts_gets_the_demo_to_witnessed(settings, tmp_path):
    """runstack's witness child: `manage.py audit_local_witness`, its key under VAR_DIR, issues the first checkpoint."""
    from audit.management.commands.audit_local_witness import local_vkey
    from tests.live import ROOT

    settings.VAR_DIR = tmp_path
    vkey = local_vkey()
    settings.AUDIT_WITNESSES, settings.AUDIT_WITNESS_QUORUM = [vkey], None
    daphne = DaphneServer(env=child_environment(AUDIT_WITNESSES=vkey))
    env = child_environment(AUDIT_WITNESSES=vkey, CONTROLPLANE_VAR_DIR=str(tmp_path))
    command = [sys.executable, "manage.py", "audit_local_witness", "--url", daphne.url, "--interval", "0.3"]
    with open(tmp_path / "witness.log", "wb") as log:
        local = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        note = until_cosigned_by(daphne, {"local-witness.localhost"})
        assert witnesses.assurance_of(note).level == WITNESSED
    finally:
        stop_process(local)
        daphne.stop()
