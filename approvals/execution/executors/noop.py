"""Records a result and does nothing else: for demos and tests."""

from __future__ import annotations

from typing import Any

from .base import ExecutionContext, Executor


class NoopExecutor(Executor):
    name = "noop"
    idempotent = True
    description = "Does nothing and records what it would have run (demos, tests)."

    def run(self, context: ExecutionContext) -> dict[str, Any]:
        return {
            "executor": self.name,
            "idempotency_key": context.idempotency_key,
            "action_type": context.action_type,
            "param_keys": sorted(context.params),
        }
