"""Replay a proposed rule set against recent requests before it goes live.

`dry_run(proposed)` classifies the last N stored requests (their current params,
target and declared facts; impact recomputed on the server exactly as
classification does) under the current policy and under the proposed one, and
reports which would change level. It reads the requests and their current
revisions' params in ONE query (a correlated subquery), whatever N is; the
current policy is one or two more. Nothing is written.

Build the proposal with `propose_rule(...)`, `propose_deletion(...)` or pass a
whole rule set (a list of RuleSpec dicts, as a policy version stores them), with
the destructive verb list it would use (default: the current policy's).
`proposal_summary` is what a pending four-eyes proposal stores and shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import JSONField, OuterRef, Subquery

from ...masking import blinded, masked_impact
from ...models import ApprovalRequest, ParamsRevision
from ..checks import specs_from_dicts
from ..current import compile_policy, current_policy
from ..rules.conditions import RuleValidationError
from ..rules.engine import Classification, ClassificationInput, CompiledPolicy, RuleSpec
from ..rules.impact import compute_impact
from ..rules.levels import LEVELS, level_rank
from ..rules.patterns import refuse_problem_patterns
from ..step_up_levels import needs_step_up

__all__ = [
    "DEFAULT_SAMPLE",
    "MAX_SAMPLE",
    "DryRunChange",
    "DryRunReport",
    "compile_proposal",
    "consequence",
    "current_rules",
    "dry_run",
    "propose_deletion",
    "proposal_summary",
    "propose_rule",
    "recent_requests",
]

DEFAULT_SAMPLE = 1000
# A dry-run is interactive; past this the admin should use the benchmark script.
MAX_SAMPLE = 100_000
# How many changed requests the report lists one by one (the counts cover all).
LISTED_CHANGES = 200
# ...and how many a stored proposal keeps to show its approver.
PROPOSAL_LISTED_CHANGES = 50


def consequence(level: str) -> str:
    """What a risk level means for the request, in the words the report uses."""
    if level == "low":
        return "auto-executed"
    if level == "prohibited":
        return "refused"
    return "approval with a step-up proof" if needs_step_up(level) else "approval needed"


@dataclass(frozen=True)
class StoredRequest:
    """What a dry-run reads of one stored request."""

    id: str
    action_type: str
    action_type_sent: str
    params: Mapping[str, Any]
    target: Mapping[str, Any]
    declared: Mapping[str, Any]
    created_at: datetime
    agent_name: str
    recorded_level: str
    recorded_rule: str
    # The params its own classification masks: a dry-run reads them blind.
    masked: frozenset[str] = frozenset()

    def classification_input(self, destructive_verbs: Sequence[str] | None = None) -> ClassificationInput:
        # The same input `services.classification_input` builds: the name as the agent
        # spelled it, and impact recomputed on the server from the current params;
        # except that masked params (and impact facts that may copy them) read as the
        # mask, under the current policy and the proposed one alike, so no proposed
        # condition can make the report an oracle for a masked value.
        action_type = self.action_type_sent or self.action_type
        impact = compute_impact(action_type, self.params, self.target, destructive_verbs=destructive_verbs)
        return ClassificationInput(
            action_type=action_type,
            params=blinded(self.params, self.masked),
            target=self.target,
            impact=masked_impact(impact, self.masked, self.params),
            declared=self.declared,
            masked=self.masked,
        )


@dataclass(frozen=True)
class DryRunChange:
    """One request whose outcome the proposal changes."""

    request_id: str
    action_type: str
    agent_name: str
    created_at: datetime
    from_level: str
    to_level: str
    from_rule: str | None
    to_rule: str | None
    from_approvals: int
    to_approvals: int

    @property
    def level_changed(self) -> bool:
        return self.from_level != self.to_level

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "action_type": self.action_type,
            "agent": self.agent_name,
            "created_at": self.created_at.isoformat(),
            "from_level": self.from_level,
            "to_level": self.to_level,
            "from_rule": self.from_rule,
            "to_rule": self.to_rule,
            "from_approvals": self.from_approvals,
            "to_approvals": self.to_approvals,
        }


@dataclass(frozen=True)
class Transition:
    from_level: str
    to_level: str
    count: int

    @property
    def sentence(self) -> str:
        """E.g. "37 requests would go from low to high: auto-executed today, approval needed",
        or "...from medium to high: approval needed either way" when only the level moves."""
        noun = "request" if self.count == 1 else "requests"
        before, after = consequence(self.from_level), consequence(self.to_level)
        outcome = f"{before} either way" if before == after else f"{before} today, {after}"
        return f"{self.count} {noun} would go from {self.from_level} to {self.to_level}: {outcome}"

    @property
    def stricter(self) -> bool:
        return level_rank(self.to_level) > level_rank(self.from_level)


@dataclass(frozen=True)
class DryRunReport:
    """The outcome of a dry-run. `changes` lists level changes first, then same-level
    changes of rule or required approvals, up to `LISTED_CHANGES` rows."""

    sample_size: int
    transitions: list[Transition]
    changes: list[DryRunChange]
    level_changes: int
    other_changes: int
    window_start: datetime | None = None
    window_end: datetime | None = None
    by_rule: dict[str, int] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        if not self.sample_size:
            return "No stored requests to replay yet."
        if not self.level_changes:
            tail = (
                f"; {self.other_changes} would be classified by a different rule or need a different "
                "number of approvals at the same level"
                if self.other_changes
                else ""
            )
            return f"None of the last {self.sample_size} requests would change level{tail}."
        return f"{self.level_changes} of the last {self.sample_size} requests would change level."

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_size": self.sample_size,
            "summary": self.summary,
            "level_changes": self.level_changes,
            "other_changes": self.other_changes,
            "transitions": [
                {
                    "from": t.from_level,
                    "to": t.to_level,
                    "count": t.count,
                    "sentence": t.sentence,
                    "stricter": t.stricter,
                }
                for t in self.transitions
            ],
            "changes": [change.to_dict() for change in self.changes],
            "listed": len(self.changes),
            "by_rule": self.by_rule,
            "window_start": self.window_start.isoformat() if self.window_start else None,
            "window_end": self.window_end.isoformat() if self.window_end else None,
        }


# --- Building proposals ------------------------------------------------------------


def current_rules() -> list[dict[str, Any]]:
    """The current policy's rule snapshot (RuleSpec dicts in evaluation order)."""
    return current_policy().compiled.to_dicts()


def propose_rule(
    rule: Mapping[str, Any], *, base: Sequence[Mapping[str, Any]] | None = None, replaces: str | None = None
) -> list[dict[str, Any]]:
    """The rule set `base` (default: the current one) with `rule` added, or replacing
    the rule named `replaces` (default: the rule of the same name). Validates `rule`
    (raises RuleValidationError naming the field)."""
    spec = RuleSpec.from_dict(dict(rule))
    refuse_problem_patterns(spec)  # as saving would: a pattern RE2 cannot run is named, not previewed
    drop = {replaces or spec.name, spec.name}
    rules = [dict(r) for r in (current_rules() if base is None else base) if r["name"] not in drop]
    rules.append(spec.to_dict())
    return rules


def propose_deletion(name: str, *, base: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    rules = [dict(r) for r in (current_rules() if base is None else base)]
    if not any(r["name"] == name for r in rules):
        raise RuleValidationError("name", f"no rule named {name!r}")
    return [r for r in rules if r["name"] != name]


def compile_proposal(
    rules: Iterable[Mapping[str, Any]], destructive_verbs: Sequence[str] | None = None
) -> CompiledPolicy:
    """Compile a proposed rule set with `destructive_verbs` (default: the current
    policy's); errors name ``rules[i].field``. The version number is the next one,
    so explanations read as they will after saving."""
    current = current_policy()
    verbs = current.destructive_verbs if destructive_verbs is None else destructive_verbs
    return compile_policy(current.compiled.version + 1, specs_from_dicts(list(rules)), verbs)


# --- Reading requests ---------------------------------------------------------------


def recent_requests(limit: int = DEFAULT_SAMPLE) -> list[StoredRequest]:
    """The `limit` most recent requests with their current params: one query."""
    current_params = ParamsRevision.objects.filter(request=OuterRef("pk"), number=OuterRef("current_revision")).values(
        "params"
    )[:1]
    rows = (
        # The stubs take the annotation for the model's current_params() method; the query is right.
        ApprovalRequest.objects.order_by("-created_at", "-pk")  # type: ignore[no-redef, misc]
        .annotate(current_params=Subquery(current_params, output_field=JSONField()))
        .values_list(
            "pk",
            "action_type",
            "action_type_sent",
            "current_params",
            "target",
            "declared",
            "created_at",
            "agent__name",
            "risk_level",
            "rule_name",
            "classification__masked_params",
        )[:limit]
    )
    return [
        StoredRequest(
            id=str(pk),
            action_type=action_type,
            action_type_sent=sent,
            params=params if isinstance(params, dict) else {},
            target=target or {},
            declared=declared or {},
            created_at=created_at,
            agent_name=agent_name,
            recorded_level=risk_level,
            recorded_rule=rule_name,
            masked=frozenset(name for name in masked or () if isinstance(name, str)),
        )
        for pk, action_type, sent, params, target, declared, created_at, agent_name, risk_level, rule_name, masked in rows
    ]


# --- The replay ----------------------------------------------------------------------


def _differs(before: Classification, after: Classification) -> bool:
    return (
        before.risk_level != after.risk_level
        or before.rule_name != after.rule_name
        or before.required_approvals != after.required_approvals
    )


def replay(requests: Sequence[StoredRequest], *, current: CompiledPolicy, proposed: CompiledPolicy) -> DryRunReport:
    """Classify `requests` under both policies in memory and report the differences."""
    level_changes: list[DryRunChange] = []
    other_changes: list[DryRunChange] = []
    pairs: Counter[tuple[str, str]] = Counter()
    by_rule: Counter[str] = Counter()
    for stored in requests:
        inp = stored.classification_input(current.destructive_verbs)
        before = current.classify(inp)
        after = proposed.classify(inp)
        if not _differs(before, after):
            continue
        change = DryRunChange(
            request_id=stored.id,
            action_type=stored.action_type,
            agent_name=stored.agent_name,
            created_at=stored.created_at,
            from_level=before.risk_level,
            to_level=after.risk_level,
            from_rule=before.rule_name,
            to_rule=after.rule_name,
            from_approvals=before.required_approvals,
            to_approvals=after.required_approvals,
        )
        if change.level_changed:
            level_changes.append(change)
            pairs[(before.risk_level, after.risk_level)] += 1
        else:
            other_changes.append(change)
        by_rule[after.rule_name or "(policy default)"] += 1
    transitions = sorted(
        (Transition(a, b, n) for (a, b), n in pairs.items()),
        key=lambda t: (-t.count, LEVELS.index(t.from_level), LEVELS.index(t.to_level)),
    )
    listed = (level_changes + other_changes)[:LISTED_CHANGES]
    return DryRunReport(
        sample_size=len(requests),
        transitions=transitions,
        changes=listed,
        level_changes=len(level_changes),
        other_changes=len(other_changes),
        window_start=requests[-1].created_at if requests else None,
        window_end=requests[0].created_at if requests else None,
        by_rule=dict(by_rule.most_common()),
    )


def dry_run(
    proposed_rules: Iterable[Mapping[str, Any]],
    *,
    limit: int = DEFAULT_SAMPLE,
    destructive_verbs: Sequence[str] | None = None,
) -> DryRunReport:
    """Replay `proposed_rules` (a whole rule set) with `destructive_verbs` (default: the
    current ones) against the last `limit` requests.

    Raises RuleValidationError (field ``rules[i].<field>``) for a broken rule set, and
    ValueError for a `limit` outside 1..MAX_SAMPLE. Reads a bounded number of queries.
    """
    if not 1 <= limit <= MAX_SAMPLE:
        raise ValueError(f"the sample must be between 1 and {MAX_SAMPLE} requests")
    proposed = compile_proposal(proposed_rules, destructive_verbs)
    current = current_policy().compiled
    return replay(recent_requests(limit), current=current, proposed=proposed)


def proposal_summary(
    proposed_rules: Iterable[Mapping[str, Any]], destructive_verbs: Sequence[str], *, limit: int = DEFAULT_SAMPLE
) -> dict[str, Any]:
    """The dry-run a pending proposal stores for its approver: the report's JSON with
    how many requests would go to a stricter and to a looser level, and the first
    `PROPOSAL_LISTED_CHANGES` changed requests."""
    report = dry_run(proposed_rules, limit=limit, destructive_verbs=destructive_verbs)
    stricter = sum(t.count for t in report.transitions if t.stricter)
    data = report.to_dict()
    data["changes"] = data["changes"][:PROPOSAL_LISTED_CHANGES]
    data["listed"] = len(data["changes"])
    return {**data, "stricter": stricter, "looser": report.level_changes - stricter}
