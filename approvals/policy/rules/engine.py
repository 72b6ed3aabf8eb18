"""Classify an action into a risk level with an ordered, admin-edited rule set.

``CompiledPolicy`` is built once per policy version and answers ``classify``
quickly: literal action types are bucketed, globs are precompiled, and the
candidate rules per spelling of an action type are cached.

Classification fails closed (DESIGN.md "Risk rules"):

1. The action type is normalized (``names.parse_action_type``); rules match the
   normalized name. A name outside the syntax raises ``ActionTypeError``.
2. Deny overrides: an enabled ``prohibited`` rule whose conditions hold or could
   hold wins, wherever it stands in the order.
3. A ``low`` rule never applies to a name containing one of the policy's
   destructive verbs as a word; it is skipped and the walk goes on.
4. Conditions are three-valued (``evaluation.py``). Walking the rules in order,
   every rule that could match is collected until the first that definitely matches
   (or the defaults); the strictest of those, by (level rank, required approvals),
   decides; on a tie, the earliest in the order.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .conditions import UNKNOWN, RuleValidationError
from .evaluation import Reading, rule_truth
from .levels import NO_APPROVAL_LEVELS
from .names import ActionTypeName, destructive_words, parse_action_type, validate_destructive_verbs
from .outcome import Classification, Decision, build_classification, is_stricter
from .rulespec import MATCH_MODES, RULE_KEYS, PolicyDefaults, RuleSpec, is_literal
from .seed import SEED_DESTRUCTIVE_VERBS

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

_CANDIDATE_CACHE_SIZE: Final = 4096


@dataclass(frozen=True)
class ClassificationInput:
    """What a rule may read.

    ``action_type`` is the name as the agent sent it (the ``sent`` form of
    ``parse_action_type``, or the raw string): classification normalizes it, and
    needs the sent spelling to see camelCase words. ``impact`` must come from
    ``compute_impact`` (server side), never from the agent; ``declared`` is what the
    agent claims and is visible only to rules that trust it. Use
    ``ClassificationInput.build`` to compute impact for you.
    """

    action_type: str
    params: Mapping[str, Any] = field(default_factory=dict)
    target: Mapping[str, Any] = field(default_factory=dict)
    impact: Mapping[str, Any] = field(default_factory=dict)
    declared: Mapping[str, Any] = field(default_factory=dict)
    # Top-level params masked on the request this call belongs to (its stored
    # classification's): explanations show them masked whichever rule decides.
    masked: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls,
        action_type: str,
        params: Mapping[str, Any],
        target: Mapping[str, Any] | None = None,
        declared: Mapping[str, Any] | None = None,
        *,
        destructive_verbs: Iterable[str] | None = None,
    ) -> ClassificationInput:
        """Input with ``impact`` computed by ``impact.compute_impact``.

        ``destructive_verbs`` (the policy's list) also make ``impact.reversible``
        false for names containing them. Raises ActionTypeError for an invalid name.
        """
        from .impact import compute_impact

        target = target or {}
        return cls(
            action_type=action_type,
            params=params,
            target=target,
            impact=compute_impact(action_type, params, target, destructive_verbs=destructive_verbs),
            declared=declared or {},
        )


@dataclass(frozen=True)
class _Plan:
    """Everything about one spelling of an action type that does not depend on params."""

    name: ActionTypeName
    verbs: tuple[str, ...]  # the policy's destructive verbs that are words of the name
    candidates: tuple[RuleSpec, ...]
    prohibited: tuple[RuleSpec, ...]
    others: tuple[RuleSpec, ...]


class CompiledPolicy:
    """An immutable, ready-to-classify rule set for one policy version.

    Build once per version and share: ``classify`` reads no database, and is safe to
    call from several threads (its one cache is a dict read and written a key at a
    time, and cleared by replacing it).
    Rule names must be unique within a policy. ``destructive_verbs`` None means the
    seeded list (``seed.SEED_DESTRUCTIVE_VERBS``), never "no verbs"; pass ``[]`` for none.
    """

    def __init__(
        self,
        version: int,
        rules: Iterable[RuleSpec],
        defaults: PolicyDefaults | None = None,
        destructive_verbs: Iterable[str] | None = None,
    ) -> None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise RuleValidationError("version", "'version' must be a non-negative integer")
        self.version = version
        self.defaults = defaults if defaults is not None else PolicyDefaults()
        verbs = SEED_DESTRUCTIVE_VERBS if destructive_verbs is None else destructive_verbs
        # A lone string is refused by the validator rather than read letter by letter.
        self.destructive_verbs: tuple[str, ...] = validate_destructive_verbs(
            verbs if isinstance(verbs, (list, tuple, str, bytes)) else list(verbs)
        )
        self._verb_set = frozenset(self.destructive_verbs)
        ordered = sorted(rules, key=lambda rule: (rule.priority, rule.name))
        self._check_unique_names(ordered)
        self.rules: tuple[RuleSpec, ...] = tuple(ordered)
        self._literal: dict[str, list[tuple[int, RuleSpec]]] = {}
        self._globs: list[tuple[int, RuleSpec]] = []
        for position, rule in enumerate(self.rules):
            if not rule.enabled:
                continue
            if is_literal(rule.action_type):
                self._literal.setdefault(rule.action_type, []).append((position, rule))
            else:
                self._globs.append((position, rule))
        self._plans: dict[str, _Plan] = {}

    @staticmethod
    def _check_unique_names(rules: Sequence[RuleSpec]) -> None:
        seen: set[str] = set()
        for rule in rules:
            if rule.name in seen:
                raise RuleValidationError("name", f"two rules are named {rule.name!r}; rule names must be unique")
            seen.add(rule.name)

    @classmethod
    def from_dicts(
        cls,
        version: int,
        rules: Iterable[Mapping[str, Any]],
        defaults: PolicyDefaults | None = None,
        destructive_verbs: Iterable[str] | None = None,
    ) -> CompiledPolicy:
        """Build from a snapshot (``[rule.to_dict(), ...]``); errors name ``rules[i].field``.

        ``destructive_verbs`` None means the seeded list; errors name ``destructive_verbs[i]``.
        """
        specs = []
        for index, data in enumerate(rules):
            try:
                specs.append(RuleSpec.from_dict(data))
            except RuleValidationError as exc:
                raise RuleValidationError(f"rules[{index}].{exc.field}", exc.message) from None
        return cls(version, specs, defaults, destructive_verbs)

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rule snapshot, in evaluation order."""
        return [rule.to_dict() for rule in self.rules]

    def candidates(self, action_type: str) -> tuple[RuleSpec, ...]:
        """Enabled rules whose glob matches the normalized ``action_type``, in evaluation order.

        Raises ActionTypeError for a name outside the action type syntax.
        """
        return self._plan_for(action_type).candidates

    def _plan_for(self, action_type: str) -> _Plan:
        cached = self._plans.get(action_type)
        if cached is not None:
            return cached
        name = parse_action_type(action_type)
        found = list(self._literal.get(name.normalized, ()))
        found.extend(item for item in self._globs if item[1].matches_normalized(name.normalized))
        found.sort(key=lambda item: item[0])
        candidates = tuple(rule for _, rule in found)
        plan = _Plan(
            name=name,
            verbs=destructive_words(name.sent, self._verb_set),
            candidates=candidates,
            prohibited=tuple(rule for rule in candidates if rule.risk_level == "prohibited"),
            others=tuple(rule for rule in candidates if rule.risk_level != "prohibited"),
        )
        if len(self._plans) >= _CANDIDATE_CACHE_SIZE:
            # Spellings come from agents; never let them grow memory unbounded.
            self._plans = {}
        self._plans[action_type] = plan
        return plan

    def classify(self, inp: ClassificationInput) -> Classification:
        """Classify ``inp`` the fail-closed way (see the module docstring).

        Raises ActionTypeError when ``inp.action_type`` is outside the syntax: callers
        validate names first (the API answers 422).
        """
        plan = self._plan_for(inp.action_type)
        reading = Reading(inp.params, inp.target, inp.impact, inp.declared, masked=inp.masked)
        decision = self._deny_override(plan, reading) or self._walk(plan, reading)
        return build_classification(
            decision,
            name=plan.name,
            verbs=plan.verbs,
            reading=reading,
            defaults=self.defaults,
            policy_version=self.version,
        )

    @staticmethod
    def _deny_override(plan: _Plan, reading: Reading) -> Decision | None:
        first = plan.candidates[0] if plan.candidates else None
        for rule in plan.prohibited:
            truth = rule_truth(rule, reading)
            if truth is not False:
                return Decision(rule, strict=truth is UNKNOWN, deny=True, first_candidate=first)
        return None

    def _walk(self, plan: _Plan, reading: Reading) -> Decision:
        """Rules in order: collect those that could match, up to the first that does."""
        block_low = bool(plan.verbs)
        possible: list[RuleSpec] = []
        blocked: list[RuleSpec] = []
        definite: RuleSpec | None = None
        for rule in plan.others:
            truth = rule_truth(rule, reading)
            if truth is False:
                continue
            if block_low and rule.risk_level == "low":
                blocked.append(rule)
            elif truth is True:
                definite = rule
                break
            else:
                possible.append(rule)
        return self._strictest(possible, definite, tuple(blocked))

    def _strictest(
        self, possible: list[RuleSpec], definite: RuleSpec | None, blocked: tuple[RuleSpec, ...]
    ) -> Decision:
        best: RuleSpec | None = None
        for rule in possible:
            # Strictly greater: on a tie the earlier rule stands.
            if best is None or rule.strictness > best.strictness:
                best = rule
        final = definite.strictness if definite is not None else self.defaults.strictness
        if best is not None and best.strictness >= final:
            return Decision(best, strict=True, passed_over=definite, blocked=blocked)
        return Decision(definite, blocked=blocked)
