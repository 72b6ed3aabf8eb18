"""Executors by name (which action type each runs is `settings.EXECUTORS`, read by the services)."""

from __future__ import annotations

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


def unknown_executor_names(mapping: dict[str, str]) -> list[str]:
    """Names in an action type -> executor mapping (``settings.EXECUTORS``) that no
    executor is registered under: a typo must not silently hand execution to the agent."""
    _load_builtins()
    return sorted({name for name in mapping.values() if name and name not in _registry})


def params_by_action_type(mapping: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """The params each action type's executor reads (``settings.EXECUTORS`` as `mapping`),
    for the rule editor's path list; executors that read none are left out."""
    _load_builtins()
    return {
        pattern: _registry[name].params
        for pattern, name in mapping.items()
        if name in _registry and _registry[name].params
    }


def _load_builtins() -> None:
    if "noop" in _registry:
        return
    from .email import EmailExecutor
    from .noop import NoopExecutor
    from .webhook import WebhookExecutor

    for executor in (NoopExecutor(), WebhookExecutor(), EmailExecutor()):
        _registry.setdefault(executor.name, executor)
