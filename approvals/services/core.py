"""The core every state change goes through: fetch-and-lock, the transition table,
refusals that must keep what they wrote, and the on-commit push.

A service opens `changing(request_id)`: one `audited_atomic()` transaction with the
request's row locked for its whole length. Inside, it checks its guards and calls
`transition` (or writes what it must) and records audit events; everything commits
together, and the push goes out only after commit. A `DomainError` raised inside
rolls everything back. A `PersistedRefusal` is the one exception to that: what was
written before it (an expiry whose deadline passed, a failed re-validation, an
audited wrong step-up) commits, and then the refusal reaches the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from audit.chain import Actor, audited_atomic, record

from .. import broadcast, errors
from ..errors import DomainError
from ..models import ApprovalRequest
from ..states import TRANSITIONS, State

__all__ = [
    "SYSTEM",
    "PersistedRefusal",
    "RequestChange",
    "changing",
    "lock",
    "not_found",
    "refuse_state",
    "request_changed",
    "transition",
]

logger = logging.getLogger(__name__)

SYSTEM = Actor.system()


@dataclass(frozen=True)
class RequestChange:
    """One committed transition: what subscribers of `request_changed` receive."""

    request_id: str
    from_state: str
    to_state: str
    verb: str
    revision: int


# The domain event: sent once per transition, after its transaction commits (never for
# one that rolled back). Receivers get `change=RequestChange(...)`; each side effect
# (starting a server-side execution, agent callbacks, notifications, the browser push)
# subscribes on its own and reads what it needs.
request_changed = Signal()


class PersistedRefusal(DomainError):
    """A refusal whose writes so far are committed before the caller sees it.

    Raise it inside `changing()` when time or a check already decided something
    that must stay decided whatever the caller does next: the deadline passed (the
    request is now expired), re-validation failed (the request is now failed), a
    wrong step-up was audited.
    """


def not_found() -> DomainError:
    """The one answer for a request that does not exist or is not the caller's."""
    return DomainError(errors.NOT_FOUND, "No such approval request.")


def lock(request_id, *, agent=None) -> ApprovalRequest:
    """Fetch the request with its row locked for the rest of the transaction.

    `agent`: the request must be this agent's; another agent's request is
    answered exactly like a missing one.
    """
    try:
        request = (
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("agent")
            .get(pk=getattr(request_id, "pk", request_id))
        )
    except ApprovalRequest.DoesNotExist:
        raise not_found() from None
    if agent is not None and request.agent_id != agent.pk:
        raise not_found()
    return request


@contextmanager
def changing(request_id, *, agent=None) -> Iterator[ApprovalRequest]:
    """One transaction with the request locked; see the module docstring.

    A `PersistedRefusal` raised in the block commits what was written, then
    propagates; any other exception rolls the block back.
    """
    refusal: PersistedRefusal | None = None
    with audited_atomic():
        request = lock(request_id, agent=agent)
        try:
            yield request
        except PersistedRefusal as error:
            refusal = error
    if refusal is not None:
        raise refusal


def transition(
    request: ApprovalRequest,
    to: str,
    *,
    actor: Actor,
    metadata: dict[str, Any] | None = None,
    insert: bool = False,
    **fields: Any,
) -> None:
    """Move a locked `request` to `to`, audit it and push it after commit.

    Only moves listed in `states.TRANSITIONS` are legal; anything else raises
    `illegal_transition` and changes nothing. `insert`: `request` is a draft not
    written yet (a submission); its row is inserted once, already in `to`.
    """
    source = request.state
    verb = TRANSITIONS.get((source, to))
    if verb is None:
        raise DomainError(
            errors.ILLEGAL_TRANSITION,
            f"A request that is {source.replace('_', ' ')} cannot become {to.replace('_', ' ')}.",
            state=source,
        )
    request.state = to
    for name, value in fields.items():
        setattr(request, name, value)
    if insert:
        request.save(force_insert=True)
    else:
        request.save(update_fields=["state", *fields])
    record(verb, actor=actor, request=request, metadata={"from": source, "to": to, **(metadata or {})})
    if to == State.PENDING_APPROVAL:
        event = broadcast.CARD_CREATED
    elif source == State.PENDING_APPROVAL:
        event = broadcast.CARD_REMOVED
    else:
        event = broadcast.CARD_UPDATED
    broadcast.publish_on_commit(event, request, new_request=insert, verb=verb)
    change = RequestChange(str(request.pk), source, to, verb, request.current_revision)
    transaction.on_commit(lambda: _announce(change))


def _announce(change: RequestChange) -> None:
    # One failing subscriber must neither stop the others nor reach the committed caller.
    for receiver, outcome in request_changed.send_robust(sender=ApprovalRequest, change=change):
        if isinstance(outcome, Exception):
            logger.error("request_changed subscriber %r failed for %s", receiver, change, exc_info=outcome)


def refuse_state(request: ApprovalRequest, expected: str) -> DomainError:
    """The refusal for a request that is not in the state a service needs."""
    if request.decided_by_label and request.state in (State.APPROVED, State.REJECTED):
        return DomainError(
            errors.ALREADY_DECIDED,
            f"Already {request.state} by {request.decided_by_label}.",
            state=request.state,
            decided_by=request.decided_by_label,
        )
    return DomainError(
        errors.ILLEGAL_TRANSITION,
        f"The request is {request.state.replace('_', ' ')}, not {expected.replace('_', ' ')}.",
        state=request.state,
    )
