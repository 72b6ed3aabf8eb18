"""Risk classification time per request with 10, 100 and 1,000 rules.

Target (DESIGN.md): under 1 ms per request with 1,000 rules. The baseline is the
same policy with the seed rules only, so the ratio shows what rule count costs.
Generated rules run before the seed rules and half of them share the benchmarked
action type without matching it: a worst case.
"""

from __future__ import annotations

import time

from approvals.policy.rules.engine import ClassificationInput, CompiledPolicy, PolicyDefaults, RuleSpec
from approvals.policy.rules.seed import SEED_RULES

from .common import SMOKE, Result, emit

INPUT = ClassificationInput.build(
    "send_email",
    {"to": [f"user{i}@example.com" for i in range(4)], "cc": ["boss@example.com"], "body": "Quarterly report"},
    {"mailbox": "outbox"},
)


def generated_rules(count: int) -> list[RuleSpec]:
    rules = [RuleSpec.from_dict(data) for data in SEED_RULES]
    for i in range(count - len(rules)):
        action_type = "send_email" if i % 2 else f"tool_{i}_*"
        rules.append(
            RuleSpec.from_dict(
                {
                    "name": f"generated_{i}",
                    "priority": i - count,
                    "action_type": action_type,
                    "risk_level": "high",
                    "match": "any",
                    "conditions": [
                        {"path": "impact.recipient_count", "op": "gt", "value": 1000 + i},
                        {"path": "params.subject", "op": "matches", "value": f"^never-{i}$"},
                    ],
                }
            )
        )
    return rules


def microseconds_per_classify(policy: CompiledPolicy, repeat: int) -> float:
    policy.classify(INPUT)
    started = time.perf_counter()
    for _ in range(repeat):
        policy.classify(INPUT)
    return (time.perf_counter() - started) / repeat * 1e6


def main() -> None:
    repeat = 200 if SMOKE else 5000
    seed_only = CompiledPolicy(1, [RuleSpec.from_dict(d) for d in SEED_RULES], PolicyDefaults())
    baseline = microseconds_per_classify(seed_only, repeat)
    results = []
    for count in (10, 100, 1000):
        policy = CompiledPolicy(1, generated_rules(count), PolicyDefaults())
        value = microseconds_per_classify(policy, max(50, repeat // (count // 10 or 1)))
        results.append(
            Result(
                metric=f"classify, {count} rules",
                value=round(value, 2),
                unit="µs/request",
                baseline=round(baseline, 2),
                baseline_name="seed policy (8 rules)",
                target="< 1000 µs at 1,000 rules",
            )
        )
    emit("classify", results)


if __name__ == "__main__":
    main()
