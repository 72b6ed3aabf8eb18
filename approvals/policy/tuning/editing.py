"""What the rule editor does besides saving one rule: validation as the admin
types, reordering and enable/disable (each ONE change through
`approvals.policy.edit_policy`: applied, or waiting for a second risk-admin), and
"test this rule" against a sample request.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from audit.chain import Actor

from ...masking import MASK, blinded, masked_facts, masked_impact, masked_paths, reads_masked, shown_params
from ...models import ApprovalRequest
from .. import Outcome, current_policy, edit_policy
from ..rules.conditions import MISSING, RuleValidationError
from ..rules.engine import ClassificationInput, RuleSpec
from ..rules.impact import compute_impact
from ..rules.names import ActionTypeError, parse_action_type
from ..rules.patterns import refuse_problem_patterns
from .dry_run import compile_proposal, propose_rule, recent_requests

__all__ = [
    "PRIORITY_STEP",
    "ConditionResult",
    "RequestSample",
    "RuleTest",
    "masked_reads",
    "reorder",
    "sample_from_request",
    "set_enabled",
    "try_rule",
    "validate_rule",
]

# Reordering renumbers priorities 10, 20, 30... so a rule can later be slotted between two.
PRIORITY_STEP = 10


def validate_rule(data: Any) -> dict[str, Any]:
    """``{"ok": True, "rule": <normalised dict>}`` or ``{"ok": False, "field", "message"}``.

    Runs exactly the validation saving runs (RuleSpec.from_dict), so what passes here
    saves (group existence aside, which `approvals.policy` checks).
    """
    try:
        spec = RuleSpec.from_dict(data)
        refuse_problem_patterns(spec)
    except RuleValidationError as exc:
        return {"ok": False, "field": exc.field, "message": exc.message}
    return {"ok": True, "rule": spec.to_dict()}


def reorder(names: Sequence[str], *, actor: Actor | None, note: str) -> Outcome:
    """Give the rules the order of `names` (every rule, each once), renumbered 10, 20,
    30...: one change through `approvals.policy` (reordering waits for a second
    risk-admin when four eyes is on).

    Raises RuleValidationError("order", ...) when `names` is not a permutation of the
    rule names, or is already their order.
    """

    def edit(rules: list[dict[str, Any]], verbs: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        by_name = {rule["name"]: rule for rule in rules}
        if sorted(names) != sorted(by_name) or len(set(names)) != len(names):
            raise RuleValidationError("order", "the new order must list every rule exactly once")
        current_order = [rule["name"] for rule in sorted(rules, key=lambda rule: (rule["priority"], rule["name"]))]
        if list(names) == current_order:
            raise RuleValidationError("order", "that is already the order")
        reordered = [
            {**by_name[name], "priority": position * PRIORITY_STEP} for position, name in enumerate(names, start=1)
        ]
        return reordered, verbs

    return edit_policy(edit, actor=actor, note=note)


def set_enabled(name: str, enabled: bool, *, actor: Actor | None, note: str) -> Outcome:
    """Enable or disable one rule: one change through `approvals.policy` (it waits
    for a second risk-admin when four eyes is on). RuleValidationError for no such
    rule, or one already in that state."""

    def edit(rules: list[dict[str, Any]], verbs: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        rule = next((r for r in rules if r["name"] == name), None)
        if rule is None:
            raise RuleValidationError("name", f"no rule named {name!r}")
        if rule["enabled"] is enabled:
            raise RuleValidationError("enabled", f"rule {name!r} is already {'enabled' if enabled else 'disabled'}")
        return [{**r, "enabled": enabled} if r["name"] == name else r for r in rules], verbs

    return edit_policy(edit, actor=actor, note=note)


# --- Test this rule ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConditionResult:
    path: str
    op: str
    value: Any
    held: bool
    actual: str  # shown value, MASK for masked params, "missing" when the path is absent
    text: str


@dataclass(frozen=True)
class RuleTest:
    """What the edited rule and the whole proposed policy make of one sample."""

    action_type_matches: bool
    rule_matches: bool
    conditions: list[ConditionResult]
    classification: dict[str, Any]
    matched_rule: str | None
    impact: dict[str, Any]
    # A stored request's masked params, and those the rules read blind (as the mask).
    masked_params: list[str] = field(default_factory=list)
    read_blind: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action_type_matches": self.action_type_matches,
            "rule_matches": self.rule_matches,
            "conditions": [c.__dict__ for c in self.conditions],
            "classification": self.classification,
            "matched_rule": self.matched_rule,
            "impact": self.impact,
            "masked_params": self.masked_params,
            "read_blind": self.read_blind,
        }


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:79] + "…"


@dataclass(frozen=True)
class RequestSample:
    """A stored request as a test sample. `sample` holds its real params and stays on
    the server (the tester evaluates it blind unless a reveal is allowed and audited);
    `shown` is the copy an answer may carry, masked through `masking.shown_params`."""

    request_id: str
    sample: dict[str, Any]
    shown: dict[str, Any]
    masked: frozenset[str]
    # The impact facts that may copy one of them (`masking.masked_facts`), masked too.
    facts: frozenset[str] = frozenset()


def sample_from_request(request_id: str) -> RequestSample | None:
    """A stored request as a test sample, or None when there is no such request.

    Which params are masked comes from the request's own classification (the rule
    that classified it), never from the rule being tested.
    """
    request = (
        ApprovalRequest.objects.filter(pk=request_id)
        .only("action_type", "target", "declared", "current_revision", "classification")
        .first()
    )
    if request is None:
        return None
    params = request.current_params()
    sample = {
        "action_type": request.action_type,
        "params": params,
        "target": request.target,
        "declared": request.declared,
    }
    shown = {**sample, "params": shown_params(request, params)}
    masked = masked_paths(request)
    facts = masked_facts(_sample_input(sample).impact, masked, params) if masked else frozenset()
    return RequestSample(str(request.pk), sample, shown, masked, facts)


def masked_reads(rule: Mapping[str, Any] | None, found: RequestSample) -> list[str]:
    """The condition paths of `rule` (the rule under test) that read one of the
    stored request's masked params (or an impact fact that may copy one) by value:
    each one an oracle for a masked value. Raises RuleValidationError for a broken rule."""
    if rule is None or not found.masked:
        return []
    spec = RuleSpec.from_dict(dict(rule))
    return reads_masked(spec.compiled_conditions, found.masked, found.facts)


def recent_samples(limit: int = 20) -> list[dict[str, Any]]:
    """Recent requests to pick a sample from (id, action type, agent, level)."""
    return [
        {
            "id": r.id,
            "action_type": r.action_type,
            "agent": r.agent_name,
            "risk_level": r.recorded_level,
            "created_at": r.created_at.isoformat(),
        }
        for r in recent_requests(limit)
    ]


def _sample_input(sample: Mapping[str, Any]) -> ClassificationInput:
    if not isinstance(sample, Mapping):
        raise RuleValidationError("sample", "the sample must be an object with action_type and params")
    action_type = sample.get("action_type")
    if not isinstance(action_type, str) or not action_type:
        raise RuleValidationError("sample.action_type", "the sample needs an action_type")
    try:
        parse_action_type(action_type)
    except ActionTypeError as error:
        raise RuleValidationError("sample.action_type", error.message) from None
    unknown = sorted(set(sample) - {"action_type", "params", "target", "declared"})
    if unknown:
        raise RuleValidationError(f"sample.{unknown[0]}", "a sample has only action_type, params, target, declared")
    parts = {}
    for key in ("params", "target", "declared"):
        value = sample.get(key, {})
        if not isinstance(value, Mapping):
            raise RuleValidationError(f"sample.{key}", f"'{key}' must be an object")
        parts[key] = value
    return ClassificationInput(
        action_type=action_type,
        params=parts["params"],
        target=parts["target"],
        impact=compute_impact(
            action_type, parts["params"], parts["target"], destructive_verbs=current_policy().compiled.destructive_verbs
        ),
        declared=parts["declared"],
    )


def try_rule(
    rule: Mapping[str, Any] | None,
    sample: Mapping[str, Any],
    *,
    replaces: str | None = None,
    masked: Collection[str] = (),
    reveal: bool = False,
) -> RuleTest:
    """Classify `sample` with `rule` (the edited rule, or None for the current policy)
    in place in the current rule set; explain each of the rule's conditions.

    `masked`: the params a stored request masks (`RequestSample.masked`). Unless
    `reveal` (the caller checked reveal permission and audited it,
    `services.allow_masked_probe`), every rule reads them, and the impact facts that
    may copy them, as the mask: nothing in the answer depends on their values. Either
    way they, and the rule's own masked params, show as the mask.

    Raises RuleValidationError for a broken rule or sample.
    """
    inp = _sample_input(sample)
    masked = frozenset(masked)
    shown_impact = masked_impact(inp.impact, masked, inp.params)
    facts = masked_facts(inp.impact, masked, inp.params)
    if masked and not reveal:
        inp = replace(inp, params=blinded(inp.params, masked), impact=shown_impact)
    inp = replace(inp, masked=masked)
    if rule is None:
        policy = current_policy().compiled
        spec = None
    else:
        spec = RuleSpec.from_dict(dict(rule))
        refuse_problem_patterns(spec)
        policy = compile_proposal(propose_rule(spec.to_dict(), replaces=replaces))
    classification = policy.classify(inp)
    results: list[ConditionResult] = []
    rule_matches = False
    action_type_matches = False
    if spec is not None:
        doc = {
            "params": inp.params,
            "target": inp.target,
            "impact": inp.impact,
            "declared": inp.declared if spec.trusts_declared else {},
        }
        redacted = set(spec.masked_params) | masked
        for condition in spec.compiled_conditions:
            held, actual = condition.evaluate(doc)
            redact = condition.param_name in redacted or (bool(reads_masked([condition], masked, facts)))
            shown = "missing" if actual is MISSING else (MASK if redact else _shown(actual))
            results.append(
                ConditionResult(
                    path=condition.path,
                    op=condition.op,
                    value=condition.value,
                    held=held,
                    actual=shown,
                    text=condition.describe(actual, redact=redact),
                )
            )
        action_type_matches = spec.matches_action_type(inp.action_type)
        each_held = [r.held for r in results]
        conditions_hold = not each_held or (all(each_held) if spec.match == "all" else any(each_held))
        rule_matches = spec.enabled and action_type_matches and conditions_hold
    read_blind = sorted(reads_masked(_all_conditions(policy, inp.action_type), masked, facts)) if not reveal else []
    return RuleTest(
        action_type_matches=action_type_matches,
        rule_matches=rule_matches,
        conditions=results,
        classification=classification.to_dict(),
        matched_rule=classification.rule_name,
        impact=shown_impact,
        masked_params=sorted(masked),
        read_blind=read_blind,
    )


def _all_conditions(policy: Any, action_type: str) -> list[Any]:
    """Every condition of the rules in `policy` that could classify `action_type`."""
    return [
        condition
        for spec in policy.rules
        if spec.matches_action_type(action_type)
        for condition in spec.compiled_conditions
    ]
