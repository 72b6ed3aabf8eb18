"""One batched proof that a contiguous run of leaves is in a tree: the export's range proof.

Pure Python (no Django), from RFC 6962 / RFC 9162 section 2.1 (`hitl_controlplane.merkle`).
The layout (`cp-audit-range-proof/1`, docs/evidence-format.md "Export proofs"): the leaves
[start, end) of the tree of `tree_size` leaves (0-based; leaf i is event seq i + 1) are
proven by

- `left`: MTH of each perfect subtree `perfect_cover(0, start)` names, largest first (the
  compact range left of the run; empty when start is 0);
- `consistency`: PROOF(end, D[tree_size]), the RFC 9162 consistency proof from the tree
  of `end` leaves to the checkpoint's tree (empty when end == tree_size).

A verifier pushes the run's leaf hashes onto `left` as onto a binary counter (equal-sized
neighbours merge: node_hash(left, right)), right-folds what is left into MTH(D[end]), and
checks the consistency proof from that root to the checkpoint's root. That costs one leaf
hash and about one node hash a row plus O(log n) for the whole run, where one inclusion
proof per row would cost ~log2(n) hashes a row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import merkle

__all__ = ["RANGE_PROOF_TYPE", "RangeProofError", "RangeVerifier", "prove_range", "range_proof_ranges"]

RANGE_PROOF_TYPE = "cp-audit-range-proof/1"


class RangeProofError(ValueError):
    """A range proof that is malformed or does not tie its leaves to the root."""


def range_proof_ranges(start: int, end: int, tree_size: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(left ranges, consistency ranges): the [a, b) ranges whose MTH, in order, make up the proof."""
    if not 0 <= start < end <= tree_size:
        raise ValueError(f"no range proof for leaves [{start}, {end}) in a tree of size {tree_size}")
    left = [(index << level, (index + 1) << level) for level, index in merkle.perfect_cover(0, start)] if start else []
    return left, merkle.consistency_ranges(end, tree_size) if end < tree_size else []


def prove_range(leaves: Sequence[bytes], start: int, end: int) -> dict[str, Any]:
    """The range proof of leaves [start, end) in the tree of all `leaves` (for vectors and tests)."""
    left, consistency = range_proof_ranges(start, end, len(leaves))
    return {
        "type": RANGE_PROOF_TYPE,
        "start": start,
        "end": end,
        "tree_size": len(leaves),
        "left": [merkle.range_hash(leaves, a, b).hex() for a, b in left],
        "consistency": [merkle.range_hash(leaves, a, b).hex() for a, b in consistency],
    }


def _hashes(value: Any, what: str) -> list[bytes]:
    if not isinstance(value, list) or not all(isinstance(item, str) and len(item) == 64 for item in value):
        raise RangeProofError(f"the proof's {what} is not a list of 64-hex-digit hashes")
    try:
        return [bytes.fromhex(item) for item in value]
    except ValueError:
        raise RangeProofError(f"the proof's {what} is not hex") from None


class RangeVerifier:
    """Checks a range proof while the run's leaves stream past, in constant memory (O(log n))."""

    def __init__(self, proof: Mapping[str, Any]) -> None:
        if proof.get("type") != RANGE_PROOF_TYPE:
            raise RangeProofError(f"the proof's type is {proof.get('type')!r}, not {RANGE_PROOF_TYPE!r}")
        numbers = [proof.get(name) for name in ("start", "end", "tree_size")]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            raise RangeProofError("the proof's start, end and tree_size are integers")
        self.start, self.end, self.tree_size = (int(str(n)) for n in numbers)
        try:
            left_ranges, consistency_ranges = range_proof_ranges(self.start, self.end, self.tree_size)
        except ValueError as exc:
            raise RangeProofError(str(exc)) from None
        left = _hashes(proof.get("left"), "left")
        self.consistency = _hashes(proof.get("consistency"), "consistency")
        if len(left) != len(left_ranges) or len(self.consistency) != len(consistency_ranges):
            raise RangeProofError(
                f"the proof holds {len(left)} left and {len(self.consistency)} consistency hashes; leaves "
                f"[{self.start}, {self.end}) of {self.tree_size} need {len(left_ranges)} and {len(consistency_ranges)}"
            )
        levels = [level for level, _ in merkle.perfect_cover(0, self.start)] if self.start else []
        self._stack: list[tuple[int, bytes]] = list(zip(levels, left))
        self.next = self.start  # the index of the leaf expected next

    def wants(self, seq: int) -> bool:
        """Whether event `seq` is one of the proven leaves."""
        return self.start < seq <= self.end

    def add(self, seq: int, leaf: bytes) -> None:
        """Push the leaf hash of event `seq`; the run's events must come in seq order, none missing."""
        if seq != self.next + 1:
            raise RangeProofError(f"the proof covers seq {self.start + 1}-{self.end}; seq {self.next + 1} is missing")
        level, node = 0, leaf
        while self._stack and self._stack[-1][0] == level:
            node = merkle.node_hash(self._stack.pop()[1], node)
            level += 1
        self._stack.append((level, node))
        self.next += 1

    def verify(self, root_hash: bytes) -> None:
        """Raise RangeProofError unless every leaf came and the proof ties them to `root_hash`."""
        if self.next != self.end:
            raise RangeProofError(
                f"the proof covers seq {self.start + 1}-{self.end}; the export holds them only up to seq {self.next}"
            )
        node = self.root_of_run
        if self.end == self.tree_size:
            ok = node == root_hash
        else:
            ok = merkle.verify_consistency(self.end, self.tree_size, node, root_hash, self.consistency)
        if not ok:
            raise RangeProofError(
                f"seq {self.start + 1}-{self.end} are not in the checkpoint's tree of {self.tree_size} events "
                "(the range proof does not reach its root): the rows were altered or the log forked"
            )

    @property
    def root_of_run(self) -> bytes:
        """MTH(D[end]) as the leaves pushed so far and `left` make it (once every leaf came)."""
        node = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            node = merkle.node_hash(left, node)
        return node
