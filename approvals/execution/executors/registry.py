"""Executors by name, and which one (if any) runs a given action type."""

from __future__ import annotations

import fnmatch

from django.conf import settings

from .base import Executor

_registry: dict[str, Executor] = {}


def register(executor: Executor, *, replace: bool = False) -> Executor:
    """Make `executor` available under its name; refuse a duplicate unless `replace`."""
    if not executor.name:
        raise ValueError("an executor needs a name")
    if executor.name in _registry and not replace:
        raise ValueError(f"executor {executor.name!r} is already registered")
    _registry[executor.name] = executor
    return executor


def get(name: str) -> Executor:
    """The executor registered as `name`; KeyError if there is none."""
    _load_builtins()
    return _registry[name]


def available() -> dict[str, Executor]:
    """Every registered executor by name (for admin pages and the runbook)."""
    _load_builtins()
    return dict(_registry)


def executor_name_for(action_type: str) -> str:
    """The executor name ``settings.EXECUTORS`` gives `action_type`, or "" (the agent executes).

    An exact key wins over patterns; among patterns, the first in the mapping's order.
    A name with no registered executor raises KeyError: a typo in settings must
    not silently hand execution to the agent.
    """
    mapping: dict[str, str] = getattr(settings, "EXECUTORS", {})
    name = mapping.get(action_type)
    if name is None:
        name = next((value for pattern, value in mapping.items() if fnmatch.fnmatchcase(action_type, pattern)), "")
    if name:
        get(name)
    return name


def executor_for(action_type: str) -> Executor | None:
    name = executor_name_for(action_type)
    return get(name) if name else None


def _load_builtins() -> None:
    if "noop" in _registry:
        return
    from .email import EmailExecutor
    from .noop import NoopExecutor
    from .webhook import WebhookExecutor

    for executor in (NoopExecutor(), WebhookExecutor(), EmailExecutor()):
        _registry.setdefault(executor.name, executor)
