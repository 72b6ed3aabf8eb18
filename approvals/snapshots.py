"""Target snapshots and their stable hashes.

An action type may register a resolver that reads the target's current state
(a document's text, an account's balance). The snapshot hash taken at submission
is what reviewers approve; `revalidate` compares it with a fresh one before any
execution, so a target that changed underneath an approval is never acted on.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Callable
from typing import Any

TargetResolver = Callable[[dict[str, Any]], dict[str, Any]]

_resolvers: list[tuple[str, TargetResolver]] = []


def stable_hash(value: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace, UTF-8).

    Agents computing a target hash themselves must use the same form.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def register_target_resolver(action_type_glob: str) -> Callable[[TargetResolver], TargetResolver]:
    def decorator(resolver: TargetResolver) -> TargetResolver:
        _resolvers.append((action_type_glob, resolver))
        return resolver

    return decorator


def unregister_target_resolver(resolver: TargetResolver) -> None:
    _resolvers[:] = [(glob, fn) for glob, fn in _resolvers if fn is not resolver]


def resolver_for(action_type: str) -> TargetResolver | None:
    for glob, resolver in reversed(_resolvers):
        if fnmatch.fnmatchcase(action_type, glob):
            return resolver
    return None


def snapshot_hash(action_type: str, target: dict[str, Any]) -> str:
    """The hash of the target as it is now: the resolver's view when one exists,
    else the target exactly as the agent described it."""
    resolver = resolver_for(action_type)
    return stable_hash(resolver(target) if resolver else target)


def current_target_hash(action_type: str, target: dict[str, Any]) -> str | None:
    """A fresh hash from the resolver, or None when no resolver knows this target."""
    resolver = resolver_for(action_type)
    return stable_hash(resolver(target)) if resolver else None
