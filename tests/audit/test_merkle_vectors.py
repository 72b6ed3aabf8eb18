"""The normative Merkle vectors (docs/vectors/merkle.json) hold for the implementation.

They are the spec's examples (docs/evidence-format.md): if this fails, either the code
or the format changed, and a changed format needs a new vectors file, not an edit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit import tree
from hitl_controlplane import merkle
from hitl_controlplane.canonical import GENESIS_HASH, chain_hash

VECTORS_FILE = Path(__file__).resolve().parents[2] / "docs" / "vectors" / "merkle.json"


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))
    assert document["format"] == "cp-audit-merkle-vectors/1"
    return document


def _leaves(vectors: dict[str, Any]) -> list[bytes]:
    return [bytes.fromhex(event["leaf_hash"]) for event in vectors["events"]]


def test_each_leaf_hashes_the_events_signed_bytes(vectors):
    previous = GENESIS_HASH
    for event in vectors["events"]:
        assert event["prev_hash"] == previous
        assert chain_hash(event["prev_hash"], event["canonical"].encode("utf-8")) == event["hash"]
        assert bytes.fromhex(event["leaf_data"]) == event["hash"].encode("ascii")
        assert bytes.fromhex(event["leaf_hash"]) == merkle.leaf_hash(bytes.fromhex(event["leaf_data"]))
        previous = event["hash"]


def test_every_root_and_proof_is_reproduced_and_verifies(vectors):
    leaves = _leaves(vectors)
    roots = {entry["tree_size"]: bytes.fromhex(entry["root_hash"]) for entry in vectors["roots"]}
    assert roots == {size: merkle.root(leaves[:size]) for size in range(len(leaves) + 1)}
    assert roots[0] == merkle.EMPTY_ROOT
    for entry in vectors["inclusion"]:
        proof = [bytes.fromhex(node) for node in entry["proof"]]
        index, size = entry["leaf_index"], entry["tree_size"]
        assert entry["seq"] == index + 1
        assert proof == merkle.inclusion_proof(index, leaves[:size])
        assert merkle.verify_inclusion(index, size, leaves[index], proof, roots[size])
    for entry in vectors["consistency"]:
        proof = [bytes.fromhex(node) for node in entry["proof"]]
        first, size = entry["first"], entry["tree_size"]
        assert proof == merkle.consistency_proof(first, leaves[:size])
        assert merkle.verify_consistency(first, size, roots[first], roots[size], proof)


def test_the_servers_stored_subtrees_fold_to_the_vector_roots(vectors):
    leaves = _leaves(vectors)
    rows = dict(tree.subtree_rows(event["hash"] for event in vectors["events"]))
    subtrees = {
        (level, (seq >> level) - 1): bytes.fromhex(stored[level * 64 : (level + 1) * 64])
        for seq, stored in rows.items()
        for level in range(len(stored) // 64)
    }
    for entry in vectors["roots"][1:]:
        assert merkle.fold_cover(merkle.perfect_cover(0, entry["tree_size"]), subtrees).hex() == entry["root_hash"]
    assert rows[1] == leaves[0].hex()
