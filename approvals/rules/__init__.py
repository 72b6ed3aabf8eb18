"""The risk rules engine: pure Python, no Django imports.

Typical use (the Django layer stores rules and snapshots ``RuleSpec.to_dict()``)::

    policy = CompiledPolicy.from_dicts(version, snapshot, PolicyDefaults())
    classification = policy.classify(ClassificationInput.build(action_type, params, target, declared))
"""

from __future__ import annotations

from .conditions import MISSING, OPERATORS, PATH_ROOTS, Condition, RuleValidationError, compile_condition, to_decimal
from .engine import (
    RULE_KEYS,
    Classification,
    ClassificationInput,
    CompiledPolicy,
    PolicyDefaults,
    RuleSpec,
    is_stricter,
)
from .impact import compute_impact, detect_sensitive, register_impact_extractor, unregister_impact_extractor
from .levels import DEFAULT_LEVEL, LEVELS, level_rank
from .seed import SEED_RULES

__all__ = [
    "DEFAULT_LEVEL",
    "LEVELS",
    "MISSING",
    "OPERATORS",
    "PATH_ROOTS",
    "RULE_KEYS",
    "SEED_RULES",
    "Classification",
    "ClassificationInput",
    "CompiledPolicy",
    "Condition",
    "PolicyDefaults",
    "RuleSpec",
    "RuleValidationError",
    "compile_condition",
    "compute_impact",
    "detect_sensitive",
    "is_stricter",
    "level_rank",
    "register_impact_extractor",
    "to_decimal",
    "unregister_impact_extractor",
]
