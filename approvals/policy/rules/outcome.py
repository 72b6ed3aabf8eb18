"""What classification returns, and how it explains itself in plain words.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .evaluation import Reading, condition_truth, unknown_conditions
from .levels import NO_APPROVAL_LEVELS, level_rank
from .names import ActionTypeName
from .rulespec import PolicyDefaults, RuleSpec

__all__ = ["Classification", "Decision", "build_classification", "is_stricter"]


@dataclass(frozen=True, kw_only=True)
class Classification:
    """The outcome of ``CompiledPolicy.classify``; store it with the request.

    ``rule_name`` is None when the policy default applied. ``required_approvals`` is
    0 for "low" (runs without approval) and "prohibited" (can never be approved).
    ``explanation`` lists what held, one line each; ``reason`` is one line.
    ``unknown_paths`` names the paths read as unknown that decided the outcome (the
    deciding rule only could match); ``blocked_rules`` names the low rules skipped
    because the action type contains a destructive verb. Stored classifications
    from before these fields read as empty.
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
    unknown_paths: tuple[str, ...] = ()
    blocked_rules: tuple[str, ...] = ()

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
            "unknown_paths": list(self.unknown_paths),
            "blocked_rules": list(self.blocked_rules),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Classification:
        """Rebuild a stored classification (trusted data written by ``to_dict``, old or new)."""
        kwargs = dict(data)
        for key in ("editable_params", "masked_params", "explanation", "unknown_paths", "blocked_rules"):
            if key in kwargs:
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


@dataclass(frozen=True)
class Decision:
    """How a classification was reached, for ``build_classification``.

    ``rule`` is None for the policy defaults. ``strict``: the rule only could match
    (it won on the strict reading of unknown values). ``deny``: a prohibited rule won
    wherever it stood. ``passed_over``: the rule that definitely matched (None with
    ``strict`` means the defaults) when a stricter possible rule beat it.
    """

    rule: RuleSpec | None
    strict: bool = False
    deny: bool = False
    passed_over: RuleSpec | None = None
    blocked: tuple[RuleSpec, ...] = ()
    first_candidate: RuleSpec | None = None


def _shown(name: ActionTypeName) -> str:
    if name.sent == name.normalized:
        return repr(name.sent)
    return f"{name.sent!r} (read as {name.normalized!r})"


def _blocked_lines(name: ActionTypeName, verbs: tuple[str, ...], blocked: tuple[RuleSpec, ...]) -> list[str]:
    said = ", ".join(repr(verb) for verb in verbs)
    return [
        f"low rule {rule.name!r} would auto-approve, but {name.sent!r} contains the destructive verb {said}; skipped"
        for rule in blocked
    ]


def _blocked_suffix(verbs: tuple[str, ...], blocked: tuple[RuleSpec, ...]) -> str:
    if not blocked:
        return ""
    rules = ", ".join(repr(rule.name) for rule in blocked)
    return f" (low rule {rules} skipped: the name contains {', '.join(repr(v) for v in verbs)})"


def _held_lines(rule: RuleSpec, reading: Reading) -> list[str]:
    """Descriptions of the conditions that held, masking values of masked params."""
    masked = set(rule.masked_params) | reading.masked
    lines = []
    for condition, agent_only in rule.evaluation_plan:
        if condition_truth(condition, agent_only, reading) is True:
            lines.append(condition.describe(reading.value(condition), redact=condition.param_name in masked))
    return lines


def build_classification(
    decision: Decision,
    *,
    name: ActionTypeName,
    verbs: tuple[str, ...],
    reading: Reading,
    defaults: PolicyDefaults,
    policy_version: int,
) -> Classification:
    """The Classification for ``decision``, with its explanation and reason."""
    blocked_names = tuple(rule.name for rule in decision.blocked)
    blocked_lines = _blocked_lines(name, verbs, decision.blocked)
    suffix = _blocked_suffix(verbs, decision.blocked)
    rule = decision.rule
    if rule is None:
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
            policy_version=policy_version,
            explanation=(
                f"no {'other ' if decision.blocked else ''}enabled rule matched action type {_shown(name)}",
                *blocked_lines,
            ),
            reason=f"no rule matched; policy default {defaults.risk_level}{suffix}",
            blocked_rules=blocked_names,
        )
    header = f"action type {_shown(name)} matches {rule.action_type!r}"
    held = _held_lines(rule, reading)
    lines = [header, *held]
    unknown_paths: tuple[str, ...] = ()
    if decision.strict:
        unknowns = unknown_conditions(rule, reading)
        unknown_paths = tuple(dict.fromkeys(condition.path for condition, _ in unknowns))
        said = "; ".join(f"{condition.path} {why}" for condition, why in unknowns)
        reason = f"{said}; read the strict way: rule {rule.name!r} could match"
        lines.extend(f"{condition.path} {why} ({condition.test_text()})" for condition, why in unknowns)
        lines.append(f"read the strict way: rule {rule.name!r} could match")
        if decision.passed_over is not None:
            passed = decision.passed_over.name
            lines.append(f"rule {passed!r} matched, but rule {rule.name!r} could match and is stricter")
        elif not decision.deny:
            lines.append(f"no rule definitely matched; rule {rule.name!r} is stricter than the policy default")
    else:
        reason = f"rule {rule.name!r} matched: {'; '.join(held) if held else header}"
    if decision.deny and decision.first_candidate is not rule:
        lines.append(f"prohibited rule {rule.name!r} wins wherever it stands in the order (deny overrides)")
    lines.extend(blocked_lines)
    return Classification(
        risk_level=rule.risk_level,
        rule_name=rule.name,
        required_approvals=0 if rule.risk_level in NO_APPROVAL_LEVELS else rule.required_approvals,
        approver_group=rule.approver_group,
        escalation_group=rule.escalation_group,
        decision_ttl_seconds=rule.decision_ttl_seconds,
        execution_window_seconds=rule.execution_window_seconds,
        editable_params=rule.editable_params,
        masked_params=rule.masked_params,
        policy_version=policy_version,
        explanation=tuple(lines),
        reason=reason + suffix,
        step_up=rule.step_up,
        unknown_paths=unknown_paths,
        blocked_rules=blocked_names,
    )
