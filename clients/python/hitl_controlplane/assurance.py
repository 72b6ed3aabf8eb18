"""How far a checkpoint note can be trusted: `unsigned`, `signed` or `witnessed`.

- `unsigned`: the note is malformed, or the pinned log key's signature on it does not verify.
- `signed`: the log key signed it; only the log's operator vouches for it (no witnesses are
  pinned, or fewer than the quorum of pinned witnesses' cosignatures verify).
- `witnessed`: the log key signed it and at least `quorum` distinct pinned witnesses
  cosigned it (cosignature/v1), each only after checking it is consistent with the
  checkpoint it cosigned before: a fork would have to fool that many independent parties.

Pure Python (no Django): the server's auditor page and any verifier use the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .signed_note import COSIGNATURE_V1, NoteError, NoteKey, split_note

__all__ = ["SIGNED", "UNSIGNED", "WITNESSED", "Assurance", "assess", "check_quorum", "default_quorum"]

UNSIGNED, SIGNED, WITNESSED = "unsigned", "signed", "witnessed"


@dataclass(frozen=True)
class Assurance:
    level: str
    quorum: int
    cosigned: tuple[str, ...]  # names of the pinned witnesses whose cosignature verified, in pinned order
    missing: tuple[str, ...]  # names of the pinned witnesses without a valid cosignature
    times: tuple[tuple[str, int], ...]  # (witness name, cosignature time) of each valid one
    reason: str


def default_quorum(witness_count: int) -> int:
    """A majority of the pinned witnesses (0 when there are none)."""
    return witness_count // 2 + 1 if witness_count else 0


def check_quorum(quorum: int, witness_count: int) -> int:
    """`quorum` when it is usable for `witness_count` witnesses; raises ValueError otherwise."""
    if witness_count == 0 and quorum == 0:
        return 0
    if not 1 <= quorum <= witness_count:
        raise ValueError(f"a witness quorum is between 1 and the {witness_count} witnesses pinned, not {quorum}")
    return quorum


def assess(note: str, log_key: NoteKey, witnesses: Sequence[NoteKey], quorum: int) -> Assurance:
    """The assurance `note` reaches under the pinned log key, witness keys and quorum."""
    quorum = check_quorum(quorum, len(witnesses))
    names = tuple(witness.name for witness in witnesses)
    if any(witness.kind != COSIGNATURE_V1 for witness in witnesses):
        raise ValueError("witness keys are cosignature/v1 (type 0x04) keys")
    try:
        body, signatures = split_note(note)
    except NoteError as exc:
        return Assurance(UNSIGNED, quorum, (), names, (), f"the note is malformed: {exc}")
    if not any(log_key.verifies(body, signature) for signature in signatures):
        reason = f"no signature on it verifies under the pinned log key {log_key.name}"
        return Assurance(UNSIGNED, quorum, (), names, (), reason)
    times = []
    for witness in witnesses:
        valid = [s for s in signatures if witness.verifies(body, s)]
        if valid:
            times.append((witness.name, valid[0].timestamp or 0))
    cosigned = tuple(name for name, _ in times)
    missing = tuple(name for name in names if name not in cosigned)
    if not witnesses:
        reason = "no witnesses are pinned, so only the log's own key vouches for it"
        return Assurance(SIGNED, 0, (), (), (), reason)
    counted = f"{len(cosigned)} of {len(witnesses)} pinned witnesses cosigned it (quorum {quorum})"
    if len(cosigned) >= quorum:
        return Assurance(WITNESSED, quorum, cosigned, missing, tuple(times), f"{counted}: {', '.join(cosigned)}")
    absent = f"; no valid cosignature from {', '.join(missing)}"
    return Assurance(SIGNED, quorum, cosigned, missing, tuple(times), f"only {counted}{absent}")
