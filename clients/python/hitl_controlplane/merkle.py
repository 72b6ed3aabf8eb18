"""The RFC 6962 Merkle tree over audit events: roots, inclusion and consistency proofs.

Pure Python (hashlib only) so the offline verifier and the witness use it without
Django. Written from RFC 6962 section 2.1 and RFC 9162 section 2.1; the Go checksum
database's `golang.org/x/mod/sumdb/tlog` cross-checks it in the tests.

Leaves: leaf i (0-based) is event seq i + 1. Its hash is SHA-256(0x00 || data), where
data is the event's signed bytes: the ASCII of its 64-hex-digit chain `hash` (what the
Ed25519 signature covers; `event_leaf_data`). That hash commits to the event's
canonical bytes and to every earlier event through `prev_hash`. Interior nodes are
SHA-256(0x01 || left || right). The tree of no leaves hashes to SHA-256("").

The proofs are computed from "range hashes": MTH(D[a:b]) for the ranges the RFC's
recursion names (`inclusion_ranges`, `consistency_ranges`). Every such range starts at
a multiple of a power of two at least its length, so it is the right fold of the
perfect subtrees `perfect_cover(a, b)` names: the server keeps those subtree hashes
and answers any proof with O(log n) stored hashes, without the leaves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "EMPTY_ROOT",
    "consistency_proof",
    "consistency_ranges",
    "event_leaf_data",
    "event_leaf_hash",
    "fold_cover",
    "inclusion_proof",
    "inclusion_ranges",
    "leaf_hash",
    "node_hash",
    "perfect_cover",
    "range_hash",
    "root",
    "verify_consistency",
    "verify_inclusion",
]

EMPTY_ROOT = hashlib.sha256(b"").digest()

RangeHash = Callable[[int, int], bytes]


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data): RFC 6962's leaf hash."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right): RFC 6962's interior node hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def event_leaf_data(row_hash: str) -> bytes:
    """The bytes an event's leaf hashes: its chain hash as ASCII (the bytes its signature covers)."""
    if len(row_hash) != 64 or row_hash != row_hash.lower():
        raise ValueError("an event hash is 64 lowercase hex digits")
    bytes.fromhex(row_hash)  # raises ValueError for anything but hex
    return row_hash.encode("ascii")


def event_leaf_hash(row_hash: str) -> bytes:
    """The leaf hash of the event whose chain hash is `row_hash`."""
    return leaf_hash(event_leaf_data(row_hash))


def _split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


# --- Over a list of leaf hashes ---------------------------------------------------------


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of the given leaf hashes."""
    if not leaves:
        return EMPTY_ROOT
    return range_hash(leaves, 0, len(leaves))


def range_hash(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    """MTH(D[start:end]) of the given leaf hashes (start < end)."""
    if end - start == 1:
        return leaves[start]
    k = _split(end - start)
    return node_hash(range_hash(leaves, start, start + k), range_hash(leaves, start + k, end))


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[n]) over the given leaf hashes."""
    return [range_hash(leaves, a, b) for a, b in inclusion_ranges(index, len(leaves))]


def consistency_proof(first: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(first, D[n]) over the given leaf hashes."""
    return [range_hash(leaves, a, b) for a, b in consistency_ranges(first, len(leaves))]


# --- Which ranges a proof is made of ------------------------------------------------------


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The ranges [a, b) whose MTH, in order, make up PATH(index, D[size]) (RFC 9162 2.1.3.1)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of size {size}")
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    return ranges[::-1]  # the recursion appends on the way out: the deepest sibling comes first


def consistency_ranges(first: int, size: int) -> list[tuple[int, int]]:
    """The ranges whose MTH, in order, make up PROOF(first, D[size]) (RFC 9162 2.1.4.1).

    Defined for 0 < first <= size; the proof from a size to itself is empty.
    """
    if not 0 < first <= size:
        raise ValueError(f"no consistency proof from size {first} to size {size}")
    ranges: list[tuple[int, int]] = []
    start, end, whole = 0, size, True
    m = first
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            m -= k
            start += k
            whole = False
    if not whole:
        ranges.append((start, end))
    return ranges[::-1]


def perfect_cover(start: int, end: int) -> list[tuple[int, int]]:
    """The perfect subtrees (level, index) that tile [start, end), largest first.

    Subtree (level, index) covers leaves [index << level, (index + 1) << level). Requires
    `start` to be a multiple of a power of two >= end - start, as every range in a
    proof or a root is; raises ValueError otherwise.
    """
    if not 0 <= start < end:
        raise ValueError(f"empty range [{start}, {end})")
    cover = []
    position, remaining = start, end - start
    while remaining:
        level = remaining.bit_length() - 1
        if position % (1 << level):
            raise ValueError(f"[{start}, {end}) is not aligned to its subtrees")
        cover.append((level, position >> level))
        position += 1 << level
        remaining -= 1 << level
    return cover


def fold_cover(cover: Sequence[tuple[int, int]], subtrees: Mapping[tuple[int, int], bytes]) -> bytes:
    """MTH of the range `cover` tiles, from its subtrees' hashes: a right fold, as MTH splits."""
    result = subtrees[cover[-1]]
    for key in reversed(cover[:-1]):
        result = node_hash(subtrees[key], result)
    return result


# --- Verifying ----------------------------------------------------------------------------


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root_hash: bytes) -> bool:
    """Whether `proof` shows leaf hash `leaf` at `index` in the tree of `size` with `root_hash` (RFC 9162 2.1.3.2)."""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root_hash


def verify_consistency(first: int, size: int, first_root: bytes, root_hash: bytes, proof: Sequence[bytes]) -> bool:
    """Whether `proof` shows the tree of `first` leaves is a prefix of the tree of `size` (RFC 9162 2.1.4.2)."""
    if not 0 < first <= size:
        return False
    if first == size:
        return not proof and first_root == root_hash
    path = list(proof)
    if not path:
        return False
    if first & (first - 1) == 0:  # an exact power of two: the old root is itself a node of the new tree
        path.insert(0, first_root)
    fn, sn = first - 1, size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_root and sr == root_hash
