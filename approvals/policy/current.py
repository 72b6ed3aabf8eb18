"""The current policy: the newest version, compiled once and reused until the next.

`compile_policy` is the one place a CompiledPolicy is built with a verb list.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from ..models import PolicyVersion, RiskRule
from .rules.engine import CompiledPolicy, PolicyDefaults, RuleSpec
from .rules.patterns import pattern_problems
from .rules.seed import SEED_DESTRUCTIVE_VERBS

__all__ = ["ActivePolicy", "compile_policy", "current_policy", "policy_defaults", "rule_to_spec"]


@dataclass(frozen=True)
class ActivePolicy:
    version_id: int | None
    compiled: CompiledPolicy
    destructive_verbs: tuple[str, ...] = tuple(SEED_DESTRUCTIVE_VERBS)


logger = logging.getLogger(__name__)

_compiled_by_key: dict[tuple[Any, ...], ActivePolicy] = {}


def policy_defaults() -> PolicyDefaults:
    return PolicyDefaults(
        risk_level=settings.DEFAULT_RISK_LEVEL,
        approver_group=settings.DEFAULT_APPROVER_GROUP,
        decision_ttl_seconds=settings.DEFAULT_DECISION_TTL_SECONDS,
        execution_window_seconds=settings.DEFAULT_EXECUTION_WINDOW_SECONDS,
    )


def compile_policy(number: int, specs: Iterable[RuleSpec], verbs: Sequence[str] | None) -> CompiledPolicy:
    """Compile rules and a verb list (None: the seeded list) with the policy defaults.

    Raises RuleValidationError("name", ...) for two rules with one name.
    """
    return CompiledPolicy(number, specs, policy_defaults(), destructive_verbs=None if verbs is None else list(verbs))


def current_policy() -> ActivePolicy:
    """The newest policy version, compiled (one small query when cached)."""
    latest = _latest_version_key()
    if latest is None:
        return ActivePolicy(None, compile_policy(0, [], None))
    # created_at is part of the key because a rolled-back transaction can reuse a pk.
    cached = _compiled_by_key.get(latest)
    if cached is None:
        pk, number, _ = latest
        rules, verbs = PolicyVersion.objects.values_list("rules", "destructive_verbs").get(pk=pk)
        specs = [RuleSpec.from_dict(rule) for rule in rules]
        _warn_of_problem_patterns(number, specs)
        compiled = compile_policy(number, specs, verbs)
        cached = ActivePolicy(pk, compiled, tuple(verbs))
        _compiled_by_key.clear()  # only the newest version is ever classified against
        _compiled_by_key[latest] = cached
    return cached


def _warn_of_problem_patterns(number: int, specs: Sequence[RuleSpec]) -> None:
    """The start-up check for patterns stored before RE2: logged once per compiled
    version; each reads as UNKNOWN (could match) until a risk-admin rewrites it."""
    for spec in specs:
        for field, why in pattern_problems(spec):
            logger.warning(
                "policy v%s, rule %s, %s: %s; it reads as could-match until rewritten", number, spec.name, field, why
            )


def _column(found: Any) -> str:
    """The database column of a concrete field (the stubs also allow relations, which have none)."""
    column: str = found.column
    return column


def _latest_version_key() -> tuple[Any, ...] | None:
    """(pk, number, created_at) of the newest policy version, or None: the cache key.

    Plain SQL: this runs on every submission, and building the ORM query cost
    more than running it (~0.13 ms of CPU against ~0.4 ms for the ORM's
    `values_list(...).first()`; tests/perf/bench_submit.py, in-process figure).
    """
    meta = PolicyVersion._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(_column(meta.get_field(name))) for name in ("id", "number", "created_at"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {quote(meta.db_table)} ORDER BY {quote(meta.get_field('number').column)} DESC LIMIT 1"
        )
        row = cursor.fetchone()
    # created_at comes back raw (text on SQLite): it only has to compare equal to itself.
    return None if row is None else tuple(row)


def rule_to_spec(rule: RiskRule) -> RuleSpec:
    return RuleSpec.from_dict(
        {
            "name": rule.name,
            "priority": rule.priority,
            "enabled": rule.enabled,
            "action_type": rule.action_type,
            "conditions": list(rule.conditions),
            "match": rule.match,
            "risk_level": rule.risk_level,
            "required_approvals": rule.required_approvals,
            "approver_group": rule.approver_group.name,
            "escalation_group": rule.escalation_group.name if rule.escalation_group is not None else None,
            "decision_ttl_seconds": rule.decision_ttl_seconds,
            "execution_window_seconds": rule.execution_window_seconds,
            "editable_params": list(rule.editable_params),
            "masked_params": list(rule.masked_params),
            "trusts_declared": rule.trusts_declared,
            "step_up": rule.step_up,
        }
    )
