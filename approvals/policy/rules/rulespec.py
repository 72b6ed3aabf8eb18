"""Risk rules and policy defaults as validated data.

Rules are data (``RuleSpec``, mirrored by a Django model and snapshotted as
``RuleSpec.to_dict()`` in each policy version); ``CompiledPolicy`` in ``engine.py``
classifies with them. Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ...bounds import BOUNDS
from .conditions import Condition, RuleValidationError, compile_condition
from .levels import DEFAULT_LEVEL, LEVELS, strictness
from .names import normalize_pattern, parse_action_type

__all__ = ["MATCH_MODES", "RULE_KEYS", "PolicyDefaults", "RuleSpec"]

MATCH_MODES: Final[tuple[str, ...]] = ("all", "any")
_GLOB_CHARS: Final = frozenset("*?[")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_NAME = 200


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


# Rule names appear in URLs (/rules/<name>/), audit rows and CSV cells: a slug only.
_RULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _require_rule_name(value: Any) -> None:
    _require_text(value, "name", max_length=100)
    if not _RULE_NAME.fullmatch(value):
        raise RuleValidationError(
            "name", f"{value!r} is not a rule name: letters, digits, '_', '-' and '.', starting with a letter or digit"
        )


def _require_int(value: Any, name: str, *, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuleValidationError(name, f"'{name}' must be an integer")
    if minimum is not None and value < minimum and abs(value) < 10**12:
        raise RuleValidationError(name, f"'{name}' must be at least {minimum} (got {value})")
    # Within what its column and the deadline arithmetic hold (approvals.bounds): never a 500.
    problem = BOUNDS[name].problem(value) if name in BOUNDS else None
    if problem:
        raise RuleValidationError(name, problem)


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
    # Patterns and names are both normalized (case-folded), so matching is exact.
    return re.compile(fnmatch.translate(pattern))


def is_literal(pattern: str) -> bool:
    """Whether a (normalized) pattern has no glob characters: it matches one name only."""
    return not (_GLOB_CHARS & set(pattern))


# ---------------------------------------------------------------------------
# RuleSpec
# ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RuleSpec:
    """One risk rule, validated on construction (directly or via ``from_dict``).

    ``action_type`` is a glob (fnmatch) over normalized action types: it is itself
    normalized (NFKC, case-folded) on construction, so ``Send_*`` is stored and
    matched as ``send_*``; characters outside the action type syntax and ``* ? [ ] !``
    are refused. ``conditions`` are condition dicts (see
    ``conditions.compile_condition``) combined by ``match`` ("all" or "any"); an
    empty list always matches.

    ``trusts_declared``: only the agent vouches for ``declared.*`` and ``target.*``.
    A rule reading ``declared.*`` must set it; without it, a ``target.*`` condition
    reads as UNKNOWN (it could hold or not, so the rule only ever counts on the
    strict reading). With it, both are taken at the agent's word for this rule.
    Raises RuleValidationError naming the bad field.
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
    # Read on the classify hot path, so plain attributes rather than properties:
    # (condition, agent_only) pairs, where agent_only conditions read as UNKNOWN.
    evaluation_plan: tuple[tuple[Condition, bool], ...] = field(init=False, repr=False, compare=False)
    match_all: bool = field(init=False, repr=False, compare=False)
    # (level rank, approvals it requires): how this rule's outcome compares.
    strictness: tuple[int, int] = field(init=False, repr=False, compare=False)
    _glob: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _require_rule_name(self.name)
        _require_int(self.priority, "priority")
        _require_bool(self.enabled, "enabled")
        _require_text(self.action_type, "action_type")
        object.__setattr__(self, "action_type", normalize_pattern(self.action_type))
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
        object.__setattr__(self, "evaluation_plan", tuple((c, self.agent_only(c)) for c in self._compiled))
        object.__setattr__(self, "match_all", self.match == "all")
        object.__setattr__(self, "strictness", strictness(self.risk_level, self.required_approvals))

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

    def agent_only(self, condition: Condition) -> bool:
        """Whether this rule reads ``condition`` as UNKNOWN: a ``target.*`` path it does not trust."""
        return condition.root == "target" and not self.trusts_declared

    def matches_action_type(self, action_type: str) -> bool:
        """Whether this rule's glob matches the normalized form of ``action_type``.

        Raises ``names.ActionTypeError`` for a name outside the action type syntax.
        """
        return self.matches_normalized(parse_action_type(action_type).normalized)

    def matches_normalized(self, name: str) -> bool:
        """Whether this rule's glob matches ``name``, already normalized."""
        return self._glob.match(name) is not None

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
    "name",
    "priority",
    "enabled",
    "action_type",
    "conditions",
    "match",
    "risk_level",
    "required_approvals",
    "approver_group",
    "escalation_group",
    "decision_ttl_seconds",
    "execution_window_seconds",
    "editable_params",
    "masked_params",
    "trusts_declared",
    "step_up",
)


# ---------------------------------------------------------------------------
# Policy defaults
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

    @property
    def strictness(self) -> tuple[int, int]:
        """(level rank, approvals it requires), as for a rule."""
        return strictness(self.risk_level, self.required_approvals)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyDefaults:
        """Build from JSON data, refusing unknown keys."""
        known = (
            "risk_level",
            "approver_group",
            "required_approvals",
            "decision_ttl_seconds",
            "execution_window_seconds",
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
