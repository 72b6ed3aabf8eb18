"""The core every state change goes through: fetch-and-lock, the transition table,
refusals that must keep what they wrote, and the domain signal sent on commit.

A service opens `changing(request_id)`: one change (`approvals.atomic.applying`, the
primitive every other object's change uses too) with the request's row locked for its
whole length. Inside, it checks its guards and calls
`transition` (or writes what it must) and records audit events; everything commits
together, and `request_changed` is sent only after commit: the browser push, agent
callbacks, notifications and server-side execution each subscribe to it. A `DomainError` raised inside
rolls everything back. A `PersistedRefusal` is the one exception to that: what was
written before it (an expiry whose deadline passed, a failed re-validation, an
audited wrong step-up) commits, and then the refusal reaches the caller.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from django.dispatch import Signal

from audit.chain import Actor, record

from .. import errors
from ..atomic import PersistedRefusal, after_commit, applying
from ..errors import DomainError
from ..models import ApprovalRequest
from ..people import full_name, user_of
from ..states import TRANSITION_VARIANTS, TRANSITIONS, State

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = [
    "SYSTEM",
    "PersistedRefusal",
    "RequestChange",
    "RequestId",
    "announce",
    "changing",
    "lock",
    "refuse_state",
    "request_changed",
    "transition",
]

logger = logging.getLogger(__name__)

SYSTEM = Actor.system()

# What every service taking a request is given: the request's id, as its callers hold it, the
# UUID (`request.pk`, a `<uuid:pk>` URL) or its text (a Celery task's argument, a JSON body,
# `RequestChange.request_id`). Not the model: a service locks and re-reads the row itself (`lock`
# still takes `.pk` off a model, as many tests pass one; typed callers pass the id).
RequestId: TypeAlias = uuid.UUID | str


@dataclass(frozen=True)
class RequestChange:
    """One committed change of a request: what subscribers of `request_changed` receive.

    A transition has `from_state != to_state`; other changes (a deadline extended, an
    approval counted towards the quorum, an escalation) keep the state and say what
    happened in `verb`. The routing facts (agent, approver group, rule) are taken when
    the change is made, so a subscriber needs no read to know who it concerns.
    """

    request_id: str
    from_state: str
    to_state: str
    verb: str
    revision: int
    agent_id: int
    approver_group_id: int | None
    rule_name: str
    escalated: bool
    # Verb-specific facts, e.g. the approvals counted so far or the groups that lost the card.
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_transition(self) -> bool:
        return self.from_state != self.to_state


# The domain event: sent once per change, after its transaction commits (never for
# one that rolled back), with `change=RequestChange(...)`. Each side effect subscribes
# on its own and builds its own payload from the change.
request_changed = Signal()


def lock(request_id: RequestId, *, agent: Agent | None = None) -> ApprovalRequest:
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
        raise errors.no_such_request() from None
    if agent is not None and request.agent_id != agent.pk:
        raise errors.no_such_request()
    return request


@contextmanager
def changing(request_id: RequestId, *, agent: Agent | None = None) -> Iterator[ApprovalRequest]:
    """One change of a request (`approvals.atomic.applying`) with its row locked; see the
    module docstring.

    A `PersistedRefusal` raised in the block commits what was written, then
    propagates; any other exception rolls the block back.
    """
    with applying():
        yield lock(request_id, agent=agent)


def transition(
    request: ApprovalRequest,
    to: str,
    *,
    actor: Actor,
    metadata: dict[str, Any] | None = None,
    insert: bool = False,
    verb: str | None = None,
    only_if_state: str | None = None,
    lost_race: DomainError | None = None,
    **fields: Any,
) -> None:
    """Move a locked `request` to `to`, audit it and push it after commit.

    Only moves listed in `states.TRANSITIONS` are legal; anything else raises
    `illegal_transition` and changes nothing. `insert`: `request` is a draft not
    written yet (a submission); its row is inserted once, already in `to`.
    `verb`: record the move under one of its `TRANSITION_VARIANTS` instead.
    `only_if_state`: write the move as one conditional update (`UPDATE ... WHERE
    state = only_if_state`), so a second writer, even one that skipped the lock,
    changes nothing; when no row matched, `lost_race` (default `illegal_transition`)
    is raised and nothing is recorded.
    """
    source = only_if_state if only_if_state is not None else request.state
    default = TRANSITIONS.get((source, to))
    if verb is not None and default is not None and verb not in TRANSITION_VARIANTS.get((source, to), ()):
        raise ValueError(f"{verb!r} does not record {source} -> {to}")  # a programming error, never a user's
    if default is None:
        raise DomainError(
            errors.ILLEGAL_TRANSITION,
            f"A request that is {source.replace('_', ' ')} cannot become {to.replace('_', ' ')}.",
            state=source,
        )
    verb = verb or default
    if only_if_state is not None:
        moved = ApprovalRequest.objects.filter(pk=request.pk, state=only_if_state).update(state=to, **fields)
        if moved != 1:
            raise lost_race or DomainError(
                errors.ILLEGAL_TRANSITION, "Another change moved the request first.", state=request.state
            )
    request.state = to
    for name, value in fields.items():
        setattr(request, name, value)
    if insert:
        request.save(force_insert=True)
    elif only_if_state is None:
        request.save(update_fields=["state", *fields])
    record(verb, actor=actor, request=request, metadata={"from": source, "to": to, **(metadata or {})})
    # Who decided travels with the push: the cards of the other reviewers (who see the
    # request's history anyway) say "decided by NAME" instead of just vanishing.
    decided = {"decided_by": fields["decided_by_label"]} if fields.get("decided_by_label") else {}
    if decided and (user := user_of(actor)) is not None:
        decided["decided_by_name"] = full_name(user)
    announce(request, verb, source=source, **decided)


def announce(request: ApprovalRequest, verb: str, *, source: str | None = None, **details: Any) -> None:
    """Send `request_changed` about `request` once the transaction commits.

    `source`: the state before a transition (by default the state did not change).
    """
    change = RequestChange(
        request_id=str(request.pk),
        from_state=source if source is not None else request.state,
        to_state=request.state,
        verb=verb,
        revision=request.current_revision,
        agent_id=request.agent_id,
        approver_group_id=request.approver_group_id,
        rule_name=request.rule_name,
        escalated=request.escalated,
        details=details,
    )
    after_commit(lambda: _announce(change), what=f"request_changed for {change.request_id}")


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
