"""Classify an action into a risk level with an ordered, admin-edited rule set.

Rules are data (``RuleSpec``, mirrored by a Django model and snapshotted as
``RuleSpec.to_dict()`` in each policy version). ``CompiledPolicy`` is built once
per policy version and answers ``classify`` quickly: literal action types are
bucketed, globs are precompiled, and the candidate list per action type is cached.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .conditions import Condition, RuleValidationError, compile_condition
from .levels import DEFAULT_LEVEL, LEVELS, level_rank

__all__ = [
    "MATCH_MODES",
    "NO_APPROVAL_LEVELS",
    "RULE_KEYS",
    "Classification",
    "ClassificationInput",
    "CompiledPolicy",
    "PolicyDefaults",
    "RuleSpec",
    "is_stricter",
]

MATCH_MODES: Final[tuple[str, ...]] = ("all", "any")
# Low runs without approval and prohibited can never be approved, so a rule's
# required_approvals means nothing for them and classification reports 0.
NO_APPROVAL_LEVELS: Final[frozenset[str]] = frozenset({"low", "prohibited"})
_GLOB_CHARS: Final = frozenset("*?[")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_NAME = 200
_CANDIDATE_CACHE_SIZE: Final = 4096


# ---------------------------------------------------------------------------
# Field checks shared by RuleSpec and PolicyDefaults
# ---------------------------------------------------------------------------


def _require_text(value: Any, name: str, *, max_length: int = _MAX_NAME) -> None:
    if not isinstance(value, str) or not value.strip():
        raise RuleValidationError(name, f"'{name}' must be a non-empty string")
    if value != value.strip():
        raise RuleValidationError(name, f"'{name}' must not start or end with whitespace")
    if len(value) > max_length:
        raise RuleValidationError(name, f"'{name}' is longer than {max_length} characters")


def _require_int(value: Any, name: str, *, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleValidationError(name, f"'{name}' must be an integer")
    if minimum is not None and value < minimum:
        raise RuleValidationError(name, f"'{name}' must be at least {minimum} (got {value})")


def _require_bool(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise RuleValidationError(name, f"'{name}' must be true or false")


def _require_level(value: Any, name: str) -> None:
    if value not in LEVELS:
        raise RuleValidationError(name, f"unknown risk level {value!r}; expected one of {', '.join(LEVELS)}")


def _require_param_names(value: Any, name: str) -> None:
    if not isinstance(value, tuple):
        raise RuleValidationError(name, f"'{name}' must be a list of param names")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not _PARAM_NAME.match(item):
            raise RuleValidationError(f"{name}[{index}]", f"{item!r} is not a param name (letters, digits, _)")
    if len(set(value)) != len(value):
        raise RuleValidationError(name, f"'{name}' lists a param twice")


def _compile_glob(pattern: str) -> re.Pattern[str]:
    # fnmatch.translate gives fnmatchcase semantics once compiled without IGNORECASE.
    return re.compile(fnmatch.translate(pattern))


def _is_literal(pattern: str) -> bool:
    return not (_GLOB_CHARS & set(pattern))


# ---------------------------------------------------------------------------
# RuleSpec
# ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RuleSpec:
    """One risk rule, validated on construction (directly or via ``from_dict``).

    ``action_type`` is a case-sensitive glob (fnmatch). ``conditions`` are condition
    dicts (see ``conditions.compile_condition``) combined by ``match`` ("all" or
    "any"); an empty list always matches. A rule reading ``declared.*`` must set
    ``trusts_declared=True``. Raises RuleValidationError naming the bad field.
    """

    name: str
    action_type: str
    risk_level: str
    priority: int = 100
    enabled: bool = True
    conditions: tuple[dict[str, Any], ...] = ()
    match: str = "all"
    required_approvals: int = 1
    approver_group: str = "reviewers"
    escalation_group: str | None = None
    decision_ttl_seconds: int = 3600
    execution_window_seconds: int = 900
    editable_params: tuple[str, ...] = ()
    masked_params: tuple[str, ...] = ()
    trusts_declared: bool = False
    step_up: bool = False
    _compiled: tuple[Condition, ...] = field(init=False, repr=False, compare=False)
    _glob: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _require_text(self.name, "name")
        _require_int(self.priority, "priority")
        _require_bool(self.enabled, "enabled")
        _require_text(self.action_type, "action_type")
        if self.match not in MATCH_MODES:
            raise RuleValidationError("match", f"unknown match {self.match!r}; expected one of all, any")
        _require_level(self.risk_level, "risk_level")
        _require_int(self.required_approvals, "required_approvals", minimum=1)
        _require_text(self.approver_group, "approver_group")
        if self.escalation_group is not None:
            _require_text(self.escalation_group, "escalation_group")
            if self.escalation_group == self.approver_group:
                raise RuleValidationError("escalation_group", "escalation group must differ from the approver group")
        _require_int(self.decision_ttl_seconds, "decision_ttl_seconds", minimum=1)
        _require_int(self.execution_window_seconds, "execution_window_seconds", minimum=1)
        _require_param_names(self.editable_params, "editable_params")
        _require_param_names(self.masked_params, "masked_params")
        _require_bool(self.trusts_declared, "trusts_declared")
        _require_bool(self.step_up, "step_up")
        object.__setattr__(self, "_glob", _compile_glob(self.action_type))
        object.__setattr__(self, "_compiled", self._compile_conditions())

    def _compile_conditions(self) -> tuple[Condition, ...]:
        if not isinstance(self.conditions, tuple):
            raise RuleValidationError("conditions", "'conditions' must be a list of conditions")
        compiled = []
        for index, data in enumerate(self.conditions):
            condition = compile_condition(data, field=f"conditions[{index}]")
            if condition.root == "declared" and not self.trusts_declared:
                raise RuleValidationError(
                    f"conditions[{index}].path",
                    f"{condition.path!r} reads what the agent declared about its own call; "
                    "set trusts_declared on this rule to allow that",
                )
            compiled.append(condition)
        # Keep our own copies so later mutation of the caller's dicts cannot
        # make to_dict() disagree with what is evaluated.
        object.__setattr__(self, "conditions", tuple(c.to_dict() for c in compiled))
        return tuple(compiled)

    def __hash__(self) -> int:
        return hash((self.name, self.priority, self.action_type, self.risk_level))

    @property
    def compiled_conditions(self) -> tuple[Condition, ...]:
        """The validated ``Condition`` objects, in order."""
        return self._compiled

    def matches_action_type(self, action_type: str) -> bool:
        """Whether this rule's glob matches ``action_type`` (case-sensitive)."""
        return self._glob.match(action_type) is not None

    @classmethod
    def from_dict(cls, data: Any) -> RuleSpec:
        """Build a rule from JSON data (lists for tuples), refusing unknown keys."""
        if not isinstance(data, Mapping):
            raise RuleValidationError("rule", "a rule must be an object")
        unknown = sorted(str(key) for key in data if key not in RULE_KEYS)
        if unknown:
            raise RuleValidationError(unknown[0], f"unknown key {unknown[0]!r}; expected one of {', '.join(RULE_KEYS)}")
        for key in ("name", "action_type", "risk_level"):
            if key not in data:
                raise RuleValidationError(key, f"'{key}' is required")
        kwargs = dict(data)
        for key in ("conditions", "editable_params", "masked_params"):
            if key in kwargs:
                if not isinstance(kwargs[key], (list, tuple)):
                    raise RuleValidationError(key, f"'{key}' must be a list")
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data; ``RuleSpec.from_dict(rule.to_dict()) == rule``."""
        return {
            "name": self.name,
            "priority": self.priority,
            "enabled": self.enabled,
            "action_type": self.action_type,
            "conditions": [condition.to_dict() for condition in self._compiled],
            "match": self.match,
            "risk_level": self.risk_level,
            "required_approvals": self.required_approvals,
            "approver_group": self.approver_group,
            "escalation_group": self.escalation_group,
            "decision_ttl_seconds": self.decision_ttl_seconds,
            "execution_window_seconds": self.execution_window_seconds,
            "editable_params": list(self.editable_params),
            "masked_params": list(self.masked_params),
            "trusts_declared": self.trusts_declared,
            "step_up": self.step_up,
        }


RULE_KEYS: Final[tuple[str, ...]] = (
    "name", "priority", "enabled", "action_type", "conditions", "match", "risk_level",
    "required_approvals", "approver_group", "escalation_group", "decision_ttl_seconds",
    "execution_window_seconds", "editable_params", "masked_params", "trusts_declared", "step_up",
)


# ---------------------------------------------------------------------------
# Policy defaults, input and output
# ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PolicyDefaults:
    """What an action gets when no rule matches. The level can never be "low"."""

    risk_level: str = DEFAULT_LEVEL
    approver_group: str = "reviewers"
    required_approvals: int = 1
    decision_ttl_seconds: int = 3600
    execution_window_seconds: int = 900

    def __post_init__(self) -> None:
        _require_level(self.risk_level, "risk_level")
        if self.risk_level == "low":
            raise RuleValidationError(
                "risk_level", "the policy default cannot be 'low': an unknown action must never run unapproved"
            )
        _require_text(self.approver_group, "approver_group")
        _require_int(self.required_approvals, "required_approvals", minimum=1)
        _require_int(self.decision_ttl_seconds, "decision_ttl_seconds", minimum=1)
        _require_int(self.execution_window_seconds, "execution_window_seconds", minimum=1)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyDefaults:
        """Build from JSON data, refusing unknown keys."""
        known = (
            "risk_level", "approver_group", "required_approvals", "decision_ttl_seconds", "execution_window_seconds",
        )
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise RuleValidationError(unknown[0], f"unknown key {unknown[0]!r}; expected one of {', '.join(known)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data for the policy version snapshot."""
        return {
            "risk_level": self.risk_level,
            "approver_group": self.approver_group,
            "required_approvals": self.required_approvals,
            "decision_ttl_seconds": self.decision_ttl_seconds,
            "execution_window_seconds": self.execution_window_seconds,
        }


@dataclass(frozen=True)
class ClassificationInput:
    """What a rule may read. ``impact`` must come from ``compute_impact`` (server side),
    never from the agent; ``declared`` is what the agent claims and is visible only to
    rules that trust it. Use ``ClassificationInput.build`` to compute impact for you.
    """

    action_type: str
    params: Mapping[str, Any] = field(default_factory=dict)
    target: Mapping[str, Any] = field(default_factory=dict)
    impact: Mapping[str, Any] = field(default_factory=dict)
    declared: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        action_type: str,
        params: Mapping[str, Any],
        target: Mapping[str, Any] | None = None,
        declared: Mapping[str, Any] | None = None,
    ) -> ClassificationInput:
        """Input with ``impact`` computed by ``impact.compute_impact``."""
        from .impact import compute_impact

        target = target or {}
        return cls(
            action_type=action_type,
            params=params,
            target=target,
            impact=compute_impact(action_type, params, target),
            declared=declared or {},
        )


@dataclass(frozen=True, kw_only=True)
class Classification:
    """The outcome of ``CompiledPolicy.classify``; store it with the request.

    ``rule_name`` is None when the policy default applied. ``required_approvals`` is
    0 for "low" (runs without approval) and "prohibited" (can never be approved).
    ``explanation`` lists what held, one line each; ``reason`` is one line.
    """

    risk_level: str
    rule_name: str | None
    required_approvals: int
    approver_group: str
    escalation_group: str | None
    decision_ttl_seconds: int
    execution_window_seconds: int
    editable_params: tuple[str, ...]
    masked_params: tuple[str, ...]
    policy_version: int
    explanation: tuple[str, ...]
    reason: str
    # The deciding rule asks for a step-up proof whatever the level (stored
    # classifications from before this field read as False).
    step_up: bool = False

    @property
    def needs_approval(self) -> bool:
        """True unless the action is low (auto) or prohibited (refused outright)."""
        return self.risk_level not in NO_APPROVAL_LEVELS

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data; ``Classification.from_dict(c.to_dict()) == c``."""
        return {
            "risk_level": self.risk_level,
            "rule_name": self.rule_name,
            "required_approvals": self.required_approvals,
            "approver_group": self.approver_group,
            "escalation_group": self.escalation_group,
            "decision_ttl_seconds": self.decision_ttl_seconds,
            "execution_window_seconds": self.execution_window_seconds,
            "editable_params": list(self.editable_params),
            "masked_params": list(self.masked_params),
            "policy_version": self.policy_version,
            "explanation": list(self.explanation),
            "reason": self.reason,
            "step_up": self.step_up,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Classification:
        """Rebuild a stored classification (trusted data written by ``to_dict``)."""
        kwargs = dict(data)
        for key in ("editable_params", "masked_params", "explanation"):
            kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


def is_stricter(new: Classification, old: Classification) -> bool:
    """Whether ``new`` asks for more than ``old``: a higher level, or more approvals.

    Either increase counts (medium with 2 approvals is stricter than high with 1).
    Nothing is stricter than prohibited, whose 0 required approvals means "never".
    """
    if old.risk_level == "prohibited":
        return False
    if level_rank(new.risk_level) > level_rank(old.risk_level):
        return True
    return new.required_approvals > old.required_approvals


# ---------------------------------------------------------------------------
# CompiledPolicy
# ---------------------------------------------------------------------------


class CompiledPolicy:
    """An immutable, ready-to-classify rule set for one policy version.

    Build once per version and share: ``classify`` is thread-safe and reads no
    database. Rule names must be unique within a policy.
    """

    def __init__(self, version: int, rules: Iterable[RuleSpec], defaults: PolicyDefaults | None = None) -> None:
        _require_int(version, "version", minimum=0)
        self.version = version
        self.defaults = defaults if defaults is not None else PolicyDefaults()
        ordered = sorted(rules, key=lambda rule: (rule.priority, rule.name))
        self._check_unique_names(ordered)
        self.rules: tuple[RuleSpec, ...] = tuple(ordered)
        self._literal: dict[str, list[tuple[int, RuleSpec]]] = {}
        self._globs: list[tuple[int, RuleSpec]] = []
        for position, rule in enumerate(self.rules):
            if not rule.enabled:
                continue
            if _is_literal(rule.action_type):
                self._literal.setdefault(rule.action_type, []).append((position, rule))
            else:
                self._globs.append((position, rule))
        self._candidates: dict[str, tuple[RuleSpec, ...]] = {}

    @staticmethod
    def _check_unique_names(rules: Sequence[RuleSpec]) -> None:
        seen: set[str] = set()
        for rule in rules:
            if rule.name in seen:
                raise RuleValidationError("name", f"two rules are named {rule.name!r}; rule names must be unique")
            seen.add(rule.name)

    @classmethod
    def from_dicts(
        cls, version: int, rules: Iterable[Mapping[str, Any]], defaults: PolicyDefaults | None = None
    ) -> CompiledPolicy:
        """Build from a snapshot (``[rule.to_dict(), ...]``); errors name ``rules[i].field``."""
        specs = []
        for index, data in enumerate(rules):
            try:
                specs.append(RuleSpec.from_dict(data))
            except RuleValidationError as exc:
                raise RuleValidationError(f"rules[{index}].{exc.field}", exc.message) from None
        return cls(version, specs, defaults)

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rule snapshot, in evaluation order."""
        return [rule.to_dict() for rule in self.rules]

    def candidates(self, action_type: str) -> tuple[RuleSpec, ...]:
        """Enabled rules whose glob matches ``action_type``, in evaluation order."""
        cached = self._candidates.get(action_type)
        if cached is not None:
            return cached
        found = list(self._literal.get(action_type, ()))
        found.extend(item for item in self._globs if item[1].matches_action_type(action_type))
        found.sort(key=lambda item: item[0])
        result = tuple(rule for _, rule in found)
        if len(self._candidates) >= _CANDIDATE_CACHE_SIZE:
            # Unknown action types come from agents; never let them grow memory unbounded.
            self._candidates.clear()
        self._candidates[action_type] = result
        return result

    def classify(self, inp: ClassificationInput) -> Classification:
        """The first enabled rule (by priority, then name) that matches wins; else the defaults."""
        base = {"params": inp.params, "target": inp.target, "impact": inp.impact, "declared": {}}
        trusting = {**base, "declared": inp.declared}
        resolved_in: dict[int, dict[str, Any]] = {id(base): {}, id(trusting): {}}
        for rule in self.candidates(inp.action_type):
            doc = trusting if rule.trusts_declared else base
            if _rule_holds(rule, doc, resolved_in[id(doc)]):
                return self._from_rule(rule, inp.action_type, doc)
        return self._from_defaults(inp.action_type)

    def _from_rule(self, rule: RuleSpec, action_type: str, doc: Mapping[str, Any]) -> Classification:
        held = _explain(rule, doc)
        header = f"action type {action_type!r} matches {rule.action_type!r}"
        reason = f"rule {rule.name!r} matched: {'; '.join(held) if held else header}"
        approvals = 0 if rule.risk_level in NO_APPROVAL_LEVELS else rule.required_approvals
        return Classification(
            risk_level=rule.risk_level,
            rule_name=rule.name,
            required_approvals=approvals,
            approver_group=rule.approver_group,
            escalation_group=rule.escalation_group,
            decision_ttl_seconds=rule.decision_ttl_seconds,
            execution_window_seconds=rule.execution_window_seconds,
            editable_params=rule.editable_params,
            masked_params=rule.masked_params,
            policy_version=self.version,
            explanation=(header, *held),
            reason=reason,
            step_up=rule.step_up,
        )

    def _from_defaults(self, action_type: str) -> Classification:
        defaults = self.defaults
        return Classification(
            risk_level=defaults.risk_level,
            rule_name=None,
            required_approvals=0 if defaults.risk_level in NO_APPROVAL_LEVELS else defaults.required_approvals,
            approver_group=defaults.approver_group,
            escalation_group=None,
            decision_ttl_seconds=defaults.decision_ttl_seconds,
            execution_window_seconds=defaults.execution_window_seconds,
            editable_params=(),
            masked_params=(),
            policy_version=self.version,
            explanation=(f"no enabled rule matched action type {action_type!r}",),
            reason=f"no rule matched; policy default {defaults.risk_level}",
        )


def _rule_holds(rule: RuleSpec, doc: Mapping[str, Any], resolved: dict[str, Any] | None = None) -> bool:
    conditions = rule.compiled_conditions
    if not conditions:
        return True
    if rule.match == "all":
        for condition in conditions:
            if not condition.holds(doc, resolved):
                return False
        return True
    for condition in conditions:
        if condition.holds(doc, resolved):
            return True
    return False


def _explain(rule: RuleSpec, doc: Mapping[str, Any]) -> list[str]:
    """Descriptions of the conditions that held, masking values of masked params."""
    masked = set(rule.masked_params)
    lines = []
    for condition in rule.compiled_conditions:
        held, actual = condition.evaluate(doc)
        if held:
            lines.append(condition.describe(actual, redact=condition.param_name in masked))
    return lines
