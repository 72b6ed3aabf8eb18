"""What the linear-time pattern stories share (tests/guards/test_patterns_*.py): a catastrophic
pattern, a rule that matches with one, and an engine that fails the test if it is ever called.
"""

from __future__ import annotations

from approvals.policy.rules.engine import ClassificationInput, CompiledPolicy, PolicyDefaults, RuleSpec

CATASTROPHIC = "^(a+)+$"


def _rule(pattern: str, *, level: str = "prohibited", name: str = "no_aaa", path: str = "params.code") -> dict:
    return {
        "name": name,
        "priority": 1,
        "action_type": "run_job",
        "risk_level": level,
        "conditions": [{"path": path, "op": "matches", "value": pattern}],
    }


def _classify(policy_rules: list[dict], params: dict, action_type: str = "run_job"):
    compiled = CompiledPolicy(1, [RuleSpec.from_dict(rule) for rule in policy_rules], PolicyDefaults())
    return compiled.classify(ClassificationInput.build(action_type=action_type, params=params))


class _NoBacktracking:
    """Stands in for the `re` module inside the rule conditions: any call fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"Python's re.{name} was called for a pattern RE2 runs")
