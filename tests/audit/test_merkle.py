"""The Merkle algebra (hitl_controlplane.merkle): every honest proof verifies, every tampered one fails.

Pure functions, no database. Fixed example counts keep CI's run the same size every time.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from hitl_controlplane import merkle

MAX_LEAVES = 70


def _leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(hashlib.sha256(str(i).encode()).hexdigest().encode()) for i in range(n)]


def _flip(proof: list[bytes], position: int, bit: int) -> list[bytes]:
    changed = bytearray(proof[position])
    changed[bit // 8] ^= 1 << (bit % 8)
    return [*proof[:position], bytes(changed), *proof[position + 1 :]]


sizes = st.integers(min_value=1, max_value=MAX_LEAVES)


def test_small_trees_follow_the_rfc_definition() -> None:
    a, b, c = _leaves(3)
    assert merkle.root([]) == hashlib.sha256(b"").digest()
    assert merkle.root([a]) == a
    assert merkle.root([a, b]) == hashlib.sha256(b"\x01" + a + b).digest()
    assert merkle.root([a, b, c]) == merkle.node_hash(merkle.node_hash(a, b), c)
    assert merkle.leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()


def test_event_leaf_data_is_the_signed_ascii_hash() -> None:
    row_hash = "ab" * 32
    assert merkle.event_leaf_data(row_hash) == row_hash.encode("ascii")
    for bad in ("AB" * 32, "ab" * 31, "zz" * 32):
        with pytest.raises(ValueError):
            merkle.event_leaf_data(bad)


@hypothesis_settings(max_examples=200, deadline=None)
@given(data=st.data(), size=sizes)
def test_every_inclusion_proof_verifies_and_a_tampered_one_fails(data: st.DataObject, size: int) -> None:
    leaves = _leaves(size)
    top = merkle.root(leaves)
    index = data.draw(st.integers(0, size - 1))
    proof = merkle.inclusion_proof(index, leaves)
    assert merkle.verify_inclusion(index, size, leaves[index], proof, top)

    other = data.draw(st.integers(0, size - 1))
    if other != index:
        assert not merkle.verify_inclusion(other, size, leaves[index], proof, top)
        assert not merkle.verify_inclusion(index, size, leaves[other], proof, top)
    assert not merkle.verify_inclusion(index, index, leaves[index], proof, top)
    assert not merkle.verify_inclusion(index, size, leaves[index], [*proof, top], top)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1))
        bit = data.draw(st.integers(0, 255))
        assert not merkle.verify_inclusion(index, size, leaves[index], _flip(proof, position, bit), top)
        assert not merkle.verify_inclusion(index, size, leaves[index], proof[:-1], top)


@hypothesis_settings(max_examples=200, deadline=None)
@given(data=st.data(), size=sizes)
def test_every_consistency_proof_verifies_and_a_tampered_one_fails(data: st.DataObject, size: int) -> None:
    leaves = _leaves(size)
    first = data.draw(st.integers(1, size))
    old, new = merkle.root(leaves[:first]), merkle.root(leaves)
    proof = merkle.consistency_proof(first, leaves)
    assert merkle.verify_consistency(first, size, old, new, proof)

    assert not merkle.verify_consistency(first, size, new if old != new else merkle.EMPTY_ROOT, new, proof)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1))
        bit = data.draw(st.integers(0, 255))
        assert not merkle.verify_consistency(first, size, old, new, _flip(proof, position, bit))
        assert not merkle.verify_consistency(first, size, old, new, proof[:-1])
        assert not merkle.verify_consistency(first, size, old, new, [*proof, new])
    # A log that rewrote one old leaf cannot prove the new tree extends the old one.
    victim = data.draw(st.integers(0, first - 1))
    forked = [*leaves[:victim], merkle.leaf_hash(b"forged"), *leaves[victim + 1 :]]
    forked_proof = merkle.consistency_proof(first, forked)
    assert not merkle.verify_consistency(first, size, old, merkle.root(forked), forked_proof)


@hypothesis_settings(max_examples=200, deadline=None)
@given(data=st.data(), size=sizes)
def test_proofs_from_stored_subtrees_equal_proofs_from_leaves(data: st.DataObject, size: int) -> None:
    """What the server does: fold the perfect subtrees each proof range covers."""
    leaves = _leaves(size)

    def from_subtrees(a: int, b: int) -> bytes:
        cover = merkle.perfect_cover(a, b)
        hashes = {(lv, ix): merkle.range_hash(leaves, ix << lv, (ix + 1) << lv) for lv, ix in cover}
        return merkle.fold_cover(cover, hashes)

    assert from_subtrees(0, size) == merkle.root(leaves)
    index = data.draw(st.integers(0, size - 1))
    first = data.draw(st.integers(1, size))
    assert [from_subtrees(a, b) for a, b in merkle.inclusion_ranges(index, size)] == merkle.inclusion_proof(
        index, leaves
    )
    assert [from_subtrees(a, b) for a, b in merkle.consistency_ranges(first, size)] == merkle.consistency_proof(
        first, leaves
    )


def test_out_of_range_requests_are_refused() -> None:
    leaves = _leaves(4)
    top = merkle.root(leaves)
    with pytest.raises(ValueError):
        merkle.inclusion_ranges(4, 4)
    with pytest.raises(ValueError):
        merkle.consistency_ranges(0, 4)
    with pytest.raises(ValueError):
        merkle.consistency_ranges(5, 4)
    with pytest.raises(ValueError):
        merkle.perfect_cover(1, 3)
    assert not merkle.verify_inclusion(4, 4, leaves[0], [], top)
    assert not merkle.verify_consistency(0, 4, merkle.EMPTY_ROOT, top, [])
    assert merkle.verify_consistency(4, 4, top, top, [])
    assert not merkle.verify_consistency(4, 4, top, top, [top])
