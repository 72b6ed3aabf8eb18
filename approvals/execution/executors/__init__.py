"""Server-side executors: the code that performs an approved action's side effect.

A registry keyed by executor name (`noop`, `webhook`, `email`, and any registered
with `register`), and a mapping from action type to executor name in
``settings.EXECUTORS`` (globs allowed, first match wins, exact names before
patterns). An approved request whose action type maps to an executor is run by a
Celery worker (`approvals.execution.runner`); any other request is claimed and
executed by its agent through the API.

Executors receive exactly the approved revision of the params and the request's
idempotency key, and must carry that key on the side effect wherever the other
side supports one. An executor declares `idempotent = True` only when running it
twice with the same key has the effect of running it once: only then is an
execution whose worker died re-run; otherwise it ends `failed` / `outcome_unknown`
for people to check.
"""

from __future__ import annotations

from .base import (
    ExecutionContext,
    ExecutionError,
    Executor,
    PermanentExecutionError,
    RetryableExecutionError,
)
from .registry import get, params_by_action_type, register, unknown_executor_names

__all__ = [
    "ExecutionContext",
    "ExecutionError",
    "Executor",
    "PermanentExecutionError",
    "RetryableExecutionError",
    "get",
    "params_by_action_type",
    "register",
    "unknown_executor_names",
]
