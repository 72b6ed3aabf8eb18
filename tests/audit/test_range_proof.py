"""The export's range proof (hitl_controlplane.range_proof): the normative vectors in
docs/vectors/range_proofs.json hold, every range of small trees verifies and refuses a changed
leaf or hash, the server's stored subtrees give the same proof, and the Go checksum database
(golang.org/x/mod/sumdb/tlog) agrees with the root the run folds to and accepts its consistency part.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from audit import tree
from audit.models import AuditTreeNode
from hitl_controlplane import merkle
from hitl_controlplane.range_proof import RangeProofError, RangeVerifier, prove_range

from .test_merkle_go import gotlog, run  # noqa: F401  (the built Go checker, a module fixture)

VECTORS = Path(__file__).resolve().parents[2] / "docs" / "vectors"


def _vector_leaves() -> list[bytes]:
    merkle_vectors = json.loads((VECTORS / "merkle.json").read_text(encoding="utf-8"))
    return [bytes.fromhex(event["leaf_hash"]) for event in merkle_vectors["events"]]


def _range_vectors() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((VECTORS / "range_proofs.json").read_text(encoding="utf-8"))
    assert document["format"] == "cp-audit-range-proof-vectors/1"
    return document


def _checked(proof: dict[str, Any], leaves: list[bytes], root_hash: bytes) -> RangeVerifier:
    verifier = RangeVerifier(proof)
    for index in range(proof["start"], proof["end"]):
        verifier.add(index + 1, leaves[index])
    verifier.verify(root_hash)
    return verifier


def test_the_range_proof_vectors_are_reproduced_and_verify() -> None:
    leaves = _vector_leaves()
    for vector in _range_vectors()["proofs"]:
        start, end, size = vector["start"], vector["end"], vector["tree_size"]
        assert (vector["first_seq"], vector["last_seq"]) == (start + 1, end)
        fields = {name: vector[name] for name in ("type", "start", "end", "tree_size", "left", "consistency")}
        assert fields == prove_range(leaves[:size], start, end)
        assert vector["root_hash"] == merkle.root(leaves[:size]).hex()
        verifier = _checked(fields, leaves, bytes.fromhex(vector["root_hash"]))
        assert verifier.root_of_run.hex() == vector["root_of_run"]


@pytest.mark.django_db
def test_the_servers_stored_subtrees_give_the_vectors_proofs() -> None:
    leaves = _vector_leaves()
    hashes = [event["hash"] for event in json.loads((VECTORS / "merkle.json").read_text())["events"]]
    AuditTreeNode.objects.bulk_create(AuditTreeNode(seq=seq, hashes=h) for seq, h in tree.subtree_rows(hashes))
    for vector in _range_vectors()["proofs"]:
        left, consistency = tree.range_proof(vector["start"], vector["end"], vector["tree_size"])
        assert ([n.hex() for n in left], [n.hex() for n in consistency]) == (vector["left"], vector["consistency"])
    assert len(leaves) == tree.size()


def test_every_range_of_small_trees_verifies_and_a_changed_leaf_or_hash_does_not() -> None:
    for size in range(1, 18):
        leaves = [merkle.leaf_hash(bytes([size, i])) for i in range(size)]
        top = merkle.root(leaves)
        for start in range(size):
            for end in range(start + 1, size + 1):
                proof = prove_range(leaves, start, end)
                _checked(proof, leaves, top)
                changed = list(leaves)
                changed[end - 1] = merkle.leaf_hash(b"altered")
                with pytest.raises(RangeProofError, match="not in the checkpoint's tree"):
                    _checked(proof, changed, top)
                for member in ("left", "consistency"):
                    if proof[member]:
                        bent = {**proof, member: ["00" * 32, *proof[member][1:]]}
                        with pytest.raises(RangeProofError):
                            _checked(bent, leaves, top)


def test_a_run_with_a_missing_or_extra_row_is_refused() -> None:
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(9)]
    proof = prove_range(leaves, 2, 6)
    verifier = RangeVerifier(proof)
    verifier.add(3, leaves[2])
    with pytest.raises(RangeProofError, match="seq 4 is missing"):
        verifier.add(5, leaves[4])
    short = RangeVerifier(proof)
    short.add(3, leaves[2])
    with pytest.raises(RangeProofError, match="only up to seq 3"):
        short.verify(merkle.root(leaves))
    with pytest.raises(RangeProofError, match="need 1 and"):
        RangeVerifier({**proof, "left": []})
    with pytest.raises(RangeProofError, match="no range proof for leaves"):
        RangeVerifier({**proof, "end": 10})


@hypothesis_settings(max_examples=25, deadline=None)
@given(data=st.data(), hashes=st.lists(st.binary(min_size=32, max_size=32).map(bytes.hex), min_size=1, max_size=200))
def test_the_go_checksum_database_agrees_with_the_range_proof(
    gotlog: Path,  # noqa: F811
    data: st.DataObject,
    hashes: list[str],
) -> None:
    leaves = [merkle.event_leaf_hash(h) for h in hashes]
    size = data.draw(st.integers(1, len(leaves)))
    start = data.draw(st.integers(0, size - 1))
    end = data.draw(st.integers(start + 1, size))
    proof = prove_range(leaves[:size], start, end)
    top = merkle.root(leaves[:size])
    folded = _checked(proof, leaves, top).root_of_run
    checks = []
    if end < size:
        checks.append(
            {"kind": "consistency", "first": end, "size": size, "proof": proof["consistency"]}
            | {"first_root": folded.hex(), "root": top.hex()}
        )
    records = [h.encode("ascii").hex() for h in hashes[:size]]
    answer = run(gotlog, {"records": records, "sizes": sorted({end, size}), "checks": checks})
    assert answer["roots"][str(end)] == folded.hex(), "left + the run's leaves fold to tlog's TreeHash(end)"
    assert answer["roots"][str(size)] == top.hex()
    assert all(result["ok"] for result in answer["results"] or []), answer["results"]
    assert [result["go_proof"] for result in answer["results"] or []] == [proof["consistency"] for _ in checks]
