"""What the apps that own the rows tell the audit pages about the subjects events name.

Audit rows carry ids (a request's uuid, an agent's id) and copies of labels, never
foreign keys, and the audit app imports no other app (.importlinter). Its pages still
show an agent's current name and what a request is now: the app that owns each kind of
row registers one lookup here from its AppConfig.ready (agents: agent names;
approvals: requests), and the pages call these. With nothing registered the pages
show what the audit rows themselves hold.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["agent_names", "register_agent_names", "register_request_summary", "request_summary"]

# The names of the agents with these ids, in one query (ids with no agent row are left out).
AgentNames = Callable[[Collection[int]], Mapping[int, str]]
# What a request is now, for the timeline's header: kind, action_type, state, risk_level,
# rule_name, created_at and agent__name (templates/audit/timeline.html), or None when its
# row is gone.
RequestSummary = Callable[[uuid.UUID], Mapping[str, Any] | None]

_agent_names: AgentNames | None = None
_request_summary: RequestSummary | None = None


def register_agent_names(lookup: AgentNames) -> None:
    """Name agents on the audit pages with `lookup` (the agents app, from its ready())."""
    global _agent_names
    _agent_names = lookup


def register_request_summary(lookup: RequestSummary) -> None:
    """Describe requests on the timeline with `lookup` (the approvals app, from its ready())."""
    global _request_summary
    _request_summary = lookup


def agent_names(ids: Collection[int]) -> dict[int, str]:
    """The current names of these agents, by id; empty when no app names agents."""
    if not ids or _agent_names is None:
        return {}
    return dict(_agent_names(ids))


def request_summary(request_id: uuid.UUID) -> dict[str, Any] | None:
    """What the request is now, or None (its row is gone, or no app describes requests)."""
    if _request_summary is None:
        return None
    summary = _request_summary(request_id)
    return None if summary is None else dict(summary)
