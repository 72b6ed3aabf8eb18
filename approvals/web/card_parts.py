"""The parts a dashboard card is made of (param rows, history, diffs, the target's view) and how
one value reads on a card; `cards` puts them together.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.vocabulary import describe

from ..masking import MASK
from ..snapshots import resolver_for, stable_hash
from ..states import Kind


@dataclass
class ParamRow:
    """One param as shown (`value`) and as pre-filled for editing (`edit_value`: the
    text itself for strings, JSON otherwise; empty when masked)."""

    key: str
    value: str
    masked: bool
    editable: bool
    is_text: bool
    changed: bool = False
    edit_value: str = ""
    is_set: bool = True


@dataclass
class HistoryRow:
    at: Any
    actor: str
    verb: str
    description: str


@dataclass
class DiffLine:
    kind: str  # "add", "del", "ctx", "hunk"
    text: str


@dataclass
class ParamChange:
    revision: int
    by: str
    key: str
    before: str
    after: str


@dataclass
class TargetChange:
    """One field the call would change on its target: the resolver's current value
    against the proposed param (text gets a line diff)."""

    key: str
    current: str
    proposed: str
    diff: list[DiffLine] = field(default_factory=list)


@dataclass
class TargetView:
    changes: list[TargetChange]
    drifted: bool  # the target changed since the agent submitted; claims will refuse
    unavailable: str = ""


def show_value(value: Any) -> tuple[str, bool]:
    """A param value as reviewers read it, and whether it reads as plain text
    (strings, numbers, and lists of them joined with commas)."""
    if isinstance(value, str):
        return value, True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value), True
    if isinstance(value, list) and all(isinstance(item, (str, int, float)) for item in value):
        return ", ".join(str(item) for item in value), True
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True), False


def edit_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def impact_rows(impact: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the action touches, in words; zero counts and empty facts are left out
    so the facts that matter stand out. Reversibility and sensitivity always show."""
    rows = []
    if impact.get("recipient_count"):
        rows.append(("Recipients", str(impact["recipient_count"])))
    if impact.get("amount") not in (None, "", "0"):
        rows.append(("Amount", str(impact["amount"])))
    if impact.get("target_count", 0) > 1:
        rows.append(("Targets", str(impact["target_count"])))
    if "reversible" in impact:
        rows.append(("Reversible", "yes" if impact["reversible"] else "no"))
    if "sensitive" in impact:
        kinds = ", ".join(str(kind) for kind in impact.get("sensitive_kinds") or ())
        rows.append(("Sensitive data", (kinds or "yes") if impact["sensitive"] else "none found"))
    unknown = [str(key).replace("_", " ") for key in impact.get("unknown") or ()]
    if unknown:  # the facts the classifier could not read with certainty, in words
        rows.append(("Could not tell", ", ".join(unknown)))
    known = {"recipient_count", "amount", "target_count", "reversible", "sensitive", "sensitive_kinds", "unknown"}
    for key in sorted(set(impact) - known):
        value = impact[key]
        if value in (None, "", [], {}):
            continue
        rows.append((key.replace("_", " ").capitalize(), json.dumps(value) if not isinstance(value, str) else value))
    return rows


def plan_diff(before: str, after: str) -> list[DiffLine]:
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("add", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("del", line[1:]))
        else:
            lines.append(DiffLine("ctx", line[1:]))
    return lines


def read_target(request, params: Mapping[str, Any], masked: set[str]) -> TargetView | None:
    """Where the action type has a target resolver, what the call would change on the
    target as it is now. Resolvers read the outside world, not this database, so the
    queue's query count stays constant."""
    resolver = resolver_for(request.action_type)
    if resolver is None or request.kind != Kind.ACTION:
        return None
    try:
        current = resolver(request.target)
    except Exception as exc:  # the card must render even when the target cannot be read
        return TargetView(changes=[], drifted=False, unavailable=f"Could not read the current target: {exc}")
    changes = []
    for key in sorted(set(params) & set(current)):
        if key in masked:  # whether it differs from the target's value is a fact about the value too
            changes.append(TargetChange(key, MASK, MASK))
            continue
        if params[key] == current[key]:
            continue
        before, after = show_value(current[key])[0], show_value(params[key])[0]
        multiline = (
            isinstance(current[key], str)
            and isinstance(params[key], str)
            and ("\n" in current[key] or "\n" in params[key])
        )
        changes.append(TargetChange(key, before, after, plan_diff(before, after) if multiline else []))
    return TargetView(changes=changes, drifted=stable_hash(current) != request.target_hash)


def describe_verb(verb: str) -> str:
    try:
        return describe(verb)
    except KeyError:
        return verb
