"""Our Merkle tree against the Go checksum database's (golang.org/x/mod/sumdb/tlog), for random sizes.

tests/audit/gotlog/main.go is built offline from Debian's `golang-go` and
`golang-golang-x-mod-dev` (`.ci/run` installs them): roots, leaf hashes and proofs
must be byte-for-byte what tlog computes, tlog must accept our proofs, and refuse
them tampered. Skipped with the reason where Go is missing; REQUIRE_SERVICES=1 fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from hitl_controlplane import merkle
from tests.fixtures.services import missing_service

PROGRAM = Path(__file__).parent / "gotlog"
DEBIAN_GOPATH = Path("/usr/share/gocode")
TLOG_SOURCE = DEBIAN_GOPATH / "src/golang.org/x/mod/sumdb/tlog"


@pytest.fixture(scope="module")
def gotlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built checker: GOPATH mode over Debian's Go sources, no module proxy, no network."""
    go = shutil.which("go")
    if go is None:
        missing_service("needs Go to cross-check the Merkle tree (apt-get install golang-go golang-golang-x-mod-dev)")
    if not TLOG_SOURCE.is_dir():
        missing_service(f"needs golang.org/x/mod/sumdb/tlog at {TLOG_SOURCE} (apt-get install golang-golang-x-mod-dev)")
    out = tmp_path_factory.mktemp("gotlog")
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(DEBIAN_GOPATH),
        "GOPROXY": "off",
        "GOFLAGS": "",
        "GOCACHE": str(out / "cache"),
    }
    # GOPATH mode builds a directory given relative to the working directory (".").
    subprocess.run([go, "build", "-o", str(out / "gotlog"), "."], cwd=PROGRAM, env=env, check=True, timeout=300)
    return out / "gotlog"


def run(binary: Path, document: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([str(binary)], input=json.dumps(document), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _hexes(values: list[bytes]) -> list[str]:
    return [value.hex() for value in values]


def _tampered(proof: list[bytes], position: int) -> list[bytes]:
    changed = bytes([proof[position][0] ^ 1]) + proof[position][1:]
    return [*proof[:position], changed, *proof[position + 1 :]]


event_hashes = st.lists(st.binary(min_size=32, max_size=32).map(bytes.hex), min_size=1, max_size=300)


@hypothesis_settings(max_examples=40, deadline=None)
@given(data=st.data(), hashes=event_hashes)
def test_roots_and_proofs_match_the_go_checksum_database(gotlog: Path, data: st.DataObject, hashes: list[str]) -> None:
    leaves = [merkle.event_leaf_hash(h) for h in hashes]
    n = len(leaves)
    sizes = sorted({1, n, data.draw(st.integers(1, n)), data.draw(st.integers(1, n))})
    checks: list[dict[str, Any]] = []
    expected: list[bool] = []
    ours: list[list[bytes]] = []
    for _ in range(3):
        size = data.draw(st.integers(1, n))
        index = data.draw(st.integers(0, size - 1))
        first = data.draw(st.integers(1, size))
        top = merkle.root(leaves[:size])
        inclusion = merkle.inclusion_proof(index, leaves[:size])
        consistency = merkle.consistency_proof(first, leaves[:size])
        old = merkle.root(leaves[:first])
        for proof, honest in [(inclusion, True), *([(_tampered(inclusion, 0), False)] if inclusion else [])]:
            checks.append(
                {"kind": "inclusion", "index": index, "size": size, "proof": _hexes(proof), "leaf": leaves[index].hex()}
                | {"root": top.hex()}
            )
            expected.append(honest)
            ours.append(inclusion)
        for proof, honest in [(consistency, True), *([(_tampered(consistency, -1), False)] if consistency else [])]:
            checks.append(
                {"kind": "consistency", "first": first, "size": size, "proof": _hexes(proof), "first_root": old.hex()}
                | {"root": top.hex()}
            )
            expected.append(honest)
            ours.append(consistency)

    answer = run(gotlog, {"records": [h.encode("ascii").hex() for h in hashes], "sizes": sizes, "checks": checks})

    assert answer["leaves"] == _hexes(leaves)
    assert answer["roots"] == {str(size): merkle.root(leaves[:size]).hex() for size in sizes}
    assert [result["ok"] for result in answer["results"]] == expected, answer["results"]
    assert [result["go_proof"] or [] for result in answer["results"]] == [_hexes(proof) for proof in ours]


def test_the_normative_vectors_hold_for_the_go_checksum_database(gotlog: Path) -> None:
    vectors = json.loads((Path(__file__).resolve().parents[2] / "docs/vectors/merkle.json").read_text())
    roots = {entry["tree_size"]: entry["root_hash"] for entry in vectors["roots"]}
    leaves = {event["seq"] - 1: event["leaf_hash"] for event in vectors["events"]}
    checks = [
        {"kind": "inclusion", "index": e["leaf_index"], "size": e["tree_size"], "proof": e["proof"]}
        | {"leaf": leaves[e["leaf_index"]], "root": roots[e["tree_size"]]}
        for e in vectors["inclusion"]
    ] + [
        {"kind": "consistency", "first": e["first"], "size": e["tree_size"], "proof": e["proof"]}
        | {"first_root": roots[e["first"]], "root": roots[e["tree_size"]]}
        for e in vectors["consistency"]
    ]
    records = [event["leaf_data"] for event in vectors["events"]]
    answer = run(gotlog, {"records": records, "sizes": sorted(s for s in roots if s), "checks": checks})
    assert answer["leaves"] == [event["leaf_hash"] for event in vectors["events"]]
    assert answer["roots"] == {str(size): root for size, root in roots.items() if size}
    assert all(result["ok"] for result in answer["results"]), answer["results"]
    assert [result["go_proof"] or [] for result in answer["results"]] == [check["proof"] for check in checks]


def test_signed_notes_and_cosignatures_open_with_go_sumdb_note(gotlog: Path) -> None:
    """x/mod's note.Open verifies our log signature; cosignature/v1 lines verify with Go's crypto/ed25519."""
    vectors = json.loads((Path(__file__).resolve().parents[2] / "docs/vectors/notes.json").read_text())
    log, witnesses = vectors["log"]["vkey"], [w["vkey"] for w in vectors["witnesses"]]
    text = vectors["note"]
    tampered = text.replace("\n42\n", "\n43\n", 1)
    notes = [
        {"text": text, "verifiers": [log], "cosigners": witnesses},
        {"text": text, "verifiers": [log], "cosigners": []},
        {"text": tampered, "verifiers": [log], "cosigners": witnesses},
        {"text": text, "verifiers": [], "cosigners": witnesses[:1]},
    ]
    answer = run(gotlog, {"records": [], "sizes": [], "checks": [], "notes": notes})
    names = [vectors["log"]["name"], *(w["name"] for w in vectors["witnesses"])]
    assert answer["notes"][0] == {"verified": names, "error": ""}
    assert answer["notes"][1] == {"verified": names[:1], "error": ""}
    assert answer["notes"][2]["error"], "Go accepted a note whose body was changed"
    assert answer["notes"][3] == {"verified": names[1:2], "error": ""}
