"""The person behind a call: an audit `Actor` that also carries the user and what they
proved for this call.

Every service takes `*, actor: Actor`. Where a person acts (deciding, changing the
policy, flipping a switch) the actor is a `Person`, which the audit chain records
like any actor and the services read for the user, the step-up proof a decision
needs and the session repeated wrong proofs end.
"""

from __future__ import annotations

from typing import Any

from audit.chain import Actor
from audit.models import ActorKind

__all__ = ["Person", "full_name", "user_of"]


class Person(Actor):
    """A signed-in person acting, as the audit chain and the services see them.

    `step_up`: the proof of presence made for this decision (or batch), if any
    (`approvals.services.step_up.StepUpProof`). `session_key`: the session the call
    came through.
    """

    user: Any
    step_up: Any
    session_key: str

    def __init__(self, user: Any, *, step_up: Any = None, session_key: str = "") -> None:
        super().__init__(kind=ActorKind.USER, id=str(user.pk), label=user.get_username() or str(user))
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "step_up", step_up)
        object.__setattr__(self, "session_key", session_key or "")

    @classmethod
    def from_request(cls, request: Any, *, step_up: Any = None) -> Person:
        """The signed-in person behind an HTTP request (form, fetch or JSON API)."""
        session = getattr(request, "session", None)
        return cls(request.user, step_up=step_up, session_key=getattr(session, "session_key", "") or "")

    def __repr__(self) -> str:
        return f"Person({self.label!r}, step_up={self.step_up!r})"


def user_of(actor: Actor | None) -> Any | None:
    """The user behind `actor` when a person acts; None for the system or an agent."""
    return actor.user if isinstance(actor, Person) else None


def full_name(user: Any) -> str:
    """What people read for `user` (presence, "decided by" on a kept draft): their full
    name, else their username. The audit chain keeps the username (`Person.label`)."""
    return (user.get_full_name() or "").strip() or user.get_username()
