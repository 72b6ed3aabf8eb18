"""The offline verifier's check of an export's checkpoint and range proof, and the assurance it reached.

An export's manifest carries `checkpoint_note` (the C2SP checkpoint with its cosignatures)
and `range_proof` (`hitl_controlplane.range_proof`), or `range_proof_absent` saying why not
(docs/evidence-format.md "Export proofs"). `TreeEvidence` recomputes the leaves of the
proven rows while the verifier walks the file (one SHA-256 a row), checks the proof
against the checkpoint's root, and grades the checkpoint with `hitl_controlplane.assurance`
under the pinned log key and witness keys:

- `unsigned`: nothing was checked against a pinned key (--no-signatures);
- `signed`: the log's own key signed the rows and the checkpoint, so only the operator
  vouches for them;
- `witnessed`: the proven rows are in a checkpoint that a quorum of pinned witnesses also
  cosigned, each only after checking it extends what it had seen.

Imports nothing from Django or the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .assurance import SIGNED, UNSIGNED, WITNESSED, Assurance, assess, check_quorum, default_quorum
from .export_files import Rejected
from .merkle import event_leaf_hash
from .range_proof import RangeProofError, RangeVerifier
from .signed_note import COSIGNATURE_V1, ED25519, NoteError, NoteKey, parse_checkpoint, split_note

__all__ = ["LEVELS", "MEANING", "TreeEvidence", "TreePins"]

LEVELS = (UNSIGNED, SIGNED, WITNESSED)
MEANING = {
    UNSIGNED: "nothing was checked against a pinned key, so anyone could have written these rows",
    SIGNED: (
        "the log's own key signed these rows and its checkpoint, so only the log's operator vouches for them "
        "(whoever holds that key could fork the log unseen)"
    ),
    WITNESSED: (
        "these rows are in a checkpoint the log key signed and a quorum of pinned witnesses cosigned, each "
        "only after checking it extends the checkpoints it saw before, so a fork would have had to fool them"
    ),
}


@dataclass(frozen=True)
class TreePins:
    """What the auditor pinned for checkpoints: log vkeys (optional), witness vkeys, quorum, level required."""

    log_keys: tuple[NoteKey, ...] = ()
    witnesses: tuple[NoteKey, ...] = ()
    quorum: int | None = None  # None: a majority of the witnesses
    require: str | None = None  # None: `witnessed` when witnesses are pinned, else `signed`

    def __post_init__(self) -> None:
        if any(key.kind != ED25519 for key in self.log_keys):
            raise ValueError("a log vkey is a note signing key (type 0x01)")
        if any(key.kind != COSIGNATURE_V1 for key in self.witnesses):
            raise ValueError("a witness vkey is a cosignature/v1 key (type 0x04)")
        if len({key.vkey for key in self.witnesses}) != len(self.witnesses):
            raise ValueError("a witness vkey is pinned twice (it would count twice towards the quorum)")
        if self.require not in (None, *LEVELS):
            raise ValueError(f"the assurance required is one of {', '.join(LEVELS)}")
        check_quorum(self.effective_quorum, len(self.witnesses))

    @property
    def effective_quorum(self) -> int:
        return default_quorum(len(self.witnesses)) if self.quorum is None else self.quorum

    @property
    def required(self) -> str:
        return self.require or (WITNESSED if self.witnesses else SIGNED)


@dataclass
class TreeEvidence:
    """The checkpoint and proof one manifest carries, checked as the rows stream past."""

    manifest: Mapping[str, Any]
    pins: TreePins
    note: str | None = None
    size: int = 0
    root_hash: bytes = b""
    origin: str = ""
    verifier: RangeVerifier | None = None
    absent: str = ""
    level: str = UNSIGNED  # what `finish` reached

    def __post_init__(self) -> None:
        note, proof = self.manifest.get("checkpoint_note"), self.manifest.get("range_proof")
        self.absent = str(self.manifest.get("range_proof_absent") or "")
        if "checkpoint_note" not in self.manifest:
            self.absent = "the export predates exports carrying a checkpoint and proof"
            return
        if note is None:
            self.absent = self.absent or "the export carries no checkpoint"
            return
        if not isinstance(note, str):
            raise Rejected("the manifest's checkpoint_note is not a signed note")
        try:
            checkpoint = parse_checkpoint(split_note(note)[0])
        except NoteError as exc:
            raise Rejected(f"the export's checkpoint is not a well-formed checkpoint note: {exc}") from None
        self.note, self.size, self.root_hash, self.origin = (
            note,
            checkpoint.size,
            checkpoint.root_hash,
            checkpoint.origin,
        )
        if proof is None:
            self.absent = self.absent or "the export carries no range proof"
            return
        if not isinstance(proof, Mapping):
            raise Rejected("the manifest's range_proof is not an object")
        try:
            self.verifier = RangeVerifier(proof)
        except RangeProofError as exc:
            raise Rejected(f"the export's range proof is malformed: {exc}") from None
        if self.verifier.tree_size != self.size:
            raise Rejected(
                f"the range proof is for a tree of {self.verifier.tree_size} events, the checkpoint's holds {self.size}"
            )
        # It must cover every exported row the checkpoint's tree holds, not a convenient few.
        first, last = self.manifest.get("first_seq"), self.manifest.get("last_seq")
        covered = (self.verifier.start + 1, self.verifier.end)
        if not isinstance(first, int) or not isinstance(last, int) or covered != (first, min(last, self.size)):
            raise Rejected(
                f"the range proof covers seq {covered[0]}-{covered[1]}, not the exported rows seq {first}-"
                f"{min(last, self.size) if isinstance(last, int) else last} the checkpoint's tree holds"
            )

    def add(self, seq: int, row_hash: str) -> None:
        """One verified row, in file order."""
        verifier = self.verifier
        if verifier is not None and verifier.wants(seq):
            try:
                verifier.add(seq, event_leaf_hash(row_hash))
            except (RangeProofError, ValueError) as exc:
                raise Rejected(f"the range proof does not hold: {exc}", seq) from None

    def finish(self, public_keys: Sequence[Ed25519PublicKey] | None, *, signatures_checked: bool) -> str:
        """Check the proof and the checkpoint's signatures; the one-line account, assurance last.

        Raises Rejected when the proof fails, the checkpoint is not the pinned log's, or (with
        keys given) the assurance reached is below the one required.
        """
        proven = ""
        if self.verifier is not None:
            try:
                self.verifier.verify(self.root_hash)
            except RangeProofError as exc:
                raise Rejected(str(exc)) from None
            proven = (
                f"range proof: seq {self.verifier.start + 1}-{self.verifier.end} are in the checkpoint's tree of "
                f"{self.size} events (root {self.root_hash.hex()[:16]}...)"
            )
        level, why = (UNSIGNED, "no key given") if not signatures_checked else (SIGNED, "")
        if signatures_checked and self.note is not None:
            graded = self._assess(public_keys or ())
            if graded is None:
                why = "the checkpoint's signature was not checked: no Ed25519 log key is pinned"
            else:
                if graded.level == UNSIGNED:
                    raise Rejected(f"the export's checkpoint is not the pinned log's: {graded.reason}")
                if self.verifier is not None:
                    level, why = graded.level, graded.reason
                else:
                    why = f"checkpoint {graded.level} ({graded.reason}), but no row is proven in it: {self.absent}"
        elif signatures_checked:
            why = f"no checkpoint ties the rows to the log's tree: {self.absent}"
        required = self.pins.required
        if signatures_checked and LEVELS.index(level) < LEVELS.index(required):
            raise Rejected(f"assurance {level}, {required} required: {why}")
        parts = [proven] if proven else [f"no range proof: {self.absent}"]
        parts.append(f"assurance {level}: {MEANING[level]}" + (f" ({why})" if why else ""))
        self.level = level
        return "; ".join(parts)

    def _assess(self, public_keys: Sequence[Ed25519PublicKey]) -> Assurance | None:
        """The best grade under any pinned log key (from --log-vkey, or the pinned public keys named by the origin)."""
        assert self.note is not None
        log_keys = list(self.pins.log_keys) or [NoteKey(self.origin, ED25519, public) for public in public_keys]
        if not log_keys:
            return None
        try:
            graded = [assess(self.note, key, self.pins.witnesses, self.pins.effective_quorum) for key in log_keys]
        except NoteError as exc:
            raise Rejected(f"the export's checkpoint names an origin that is no key name: {exc}") from None
        return max(graded, key=lambda found: LEVELS.index(found.level))
