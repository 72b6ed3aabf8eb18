"""The risk rules engine: pure Python, no Django imports.

Typical use (the Django layer stores rules and snapshots ``RuleSpec.to_dict()``)::

    name = parse_action_type(raw)                      # ActionTypeError -> 422
    policy = CompiledPolicy.from_dicts(version, snapshot, PolicyDefaults(), destructive_verbs)
    classification = policy.classify(ClassificationInput.build(name.sent, params, target, declared))
"""

from __future__ import annotations

from .conditions import (
    MISSING,
    OPERATORS,
    PATH_ROOTS,
    UNKNOWN,
    Condition,
    RuleValidationError,
    compile_condition,
    to_decimal,
)
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
from .levels import DEFAULT_LEVEL, LEVELS, level_rank, strictness
from .names import (
    ActionTypeError,
    ActionTypeName,
    action_words,
    destructive_words,
    parse_action_type,
    validate_destructive_verbs,
)
from .seed import SEED_DESTRUCTIVE_VERBS, SEED_RULES

__all__ = [
    "DEFAULT_LEVEL",
    "LEVELS",
    "MISSING",
    "OPERATORS",
    "PATH_ROOTS",
    "RULE_KEYS",
    "SEED_DESTRUCTIVE_VERBS",
    "SEED_RULES",
    "UNKNOWN",
    "ActionTypeError",
    "ActionTypeName",
    "Classification",
    "ClassificationInput",
    "CompiledPolicy",
    "Condition",
    "PolicyDefaults",
    "RuleSpec",
    "RuleValidationError",
    "action_words",
    "compile_condition",
    "compute_impact",
    "destructive_words",
    "detect_sensitive",
    "is_stricter",
    "level_rank",
    "parse_action_type",
    "register_impact_extractor",
    "strictness",
    "to_decimal",
    "unregister_impact_extractor",
    "validate_destructive_verbs",
]
