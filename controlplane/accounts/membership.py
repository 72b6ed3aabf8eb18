"""Who changed a group's membership: one `group.membership_changed` event per group.

Group membership decides who may approve, so every change to it is audited, from
either side of the relation (`user.groups.add(g)`, `group.user_set.remove(u)`,
`.set()`, `.clear()`), through the admin, the API, a command or a shell. The event
is recorded in the same transaction as the change: if the change rolls back, so
does its event, and if the event cannot be recorded, the change fails.

Who made the change:
- inside `acting_as(actor, via=...)`, that actor (for jobs acting for someone);
- in a web request, whoever is signed in (`MembershipActorMiddleware` remembers
  the request in a ContextVar, so concurrent requests under ASGI never mix);
- otherwise the process: `Actor.system("manage.py shell")`, `"celery"`, ...

Never silently unattributed. Changes that bypass the m2m manager (a raw insert
into the through table, `bulk_create` on it, cascades when a user or group is
deleted) send no signal and are not seen here. Data migrations use historical
models, whose through model is another class, so they are not seen either.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Field, Model
from django.db.models.signals import m2m_changed
from django.http import HttpRequest

from approvals.atomic import applying
from audit.chain import Actor, record
from controlplane.http.dual_mode import DualModeMiddleware

__all__ = [
    "MembershipActorMiddleware",
    "acting_as",
    "connect",
    "current_actor",
    "on_membership_changed",
]

VERB = "group.membership_changed"
DISPATCH_UID = "controlplane.accounts.membership.audit"
_SHELL_COMMANDS = frozenset({"shell", "shell_plus", "dbshell"})
_MANAGE_PROGRAMS = frozenset({"manage.py", "django-admin", "django-admin.py", "__main__.py"})


# --- Who is acting -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Acting:
    actor: Actor
    via: str


# The request being served by this task or thread, if any (set by the middleware).
_current_request: ContextVar[HttpRequest | None] = ContextVar("membership_request", default=None)
# An explicit actor for the current block, if any (set by acting_as()).
_explicit: ContextVar[_Acting | None] = ContextVar("membership_actor", default=None)
# Where a person changes membership by hand: these paths go through four eyes.
GATED_VIA = frozenset({"admin", "web", "api"})


@contextmanager
def acting_as(actor: Actor, *, via: str) -> Iterator[None]:
    """Attribute membership changes made inside the block to `actor`, reached `via` something.

    For code that changes membership on someone's behalf outside their request
    (a task, a command acting for a named admin). Wins over the request and process.
    """
    token = _explicit.set(_Acting(actor=actor, via=via))
    try:
        yield
    finally:
        _explicit.reset(token)


def current_actor() -> tuple[Actor, str]:
    """Who is changing membership right now, and through what ("admin", "api", "web",
    "shell", "command", "process", or what `acting_as` said)."""
    explicit = _explicit.get()
    if explicit is not None:
        return explicit.actor, explicit.via
    approver = _approver()
    if approver is not None:  # a second risk-admin's approval is being applied
        return approver, "four_eyes"
    request = _current_request.get()
    if request is not None:
        return _request_actor(request)
    return _process_actor()


def _request_actor(request: HttpRequest) -> tuple[Actor, str]:
    via = _request_via(request)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        if getattr(user, "pk", None) is not None:
            return Actor.for_user(user), via
        agent = getattr(user, "agent", None)  # an agent's token (agents.api.auth.AgentPrincipal)
        if agent is not None:
            return Actor.for_agent(agent), via
    # Nobody signed in yet something changed membership: say so rather than guess.
    return Actor.system(f"unauthenticated {via} request"), via


def _request_via(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is not None and "admin" in match.namespaces:
        return "admin"
    if request.path_info.startswith("/api/"):
        return "api"
    return "web"


def _process_actor() -> tuple[Actor, str]:
    """The command or program running, for changes made outside any request."""
    argv = sys.argv or [""]
    program = Path(argv[0]).name or "python"
    command = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
    if program in _MANAGE_PROGRAMS and command:
        return Actor.system(f"manage.py {command}"), "shell" if command in _SHELL_COMMANDS else "command"
    return Actor.system(program), "process"


class MembershipActorMiddleware(DualModeMiddleware):
    """Remembers the current request for the duration of the view, sync or async.

    Place it after AuthenticationMiddleware. The user is read only when a
    membership change happens, so requests that change nothing pay nothing.
    """

    @contextmanager
    def around(self, request: HttpRequest) -> Iterator[None]:
        # Each ASGI request runs in its own task with its own copy of the context; a
        # sync view called from there through sync_to_async sees this value too.
        token = _current_request.set(request)
        try:
            yield
        finally:
            _current_request.reset(token)


# --- The receiver -----------------------------------------------------------------------------


@dataclass
class _GroupChange:
    added: set[int] = field(default_factory=set)
    removed: set[int] = field(default_factory=set)


# Members (or groups) captured before a remove or clear, until its post_ signal.
# Keyed by the instance's identity and the operation: the post_ signal always
# follows its own pre_ one in the same thread or task, so a stale entry left by a
# failed operation is overwritten before it could be read.
_before: ContextVar[dict[tuple[int, str], frozenset[int]] | None] = ContextVar("membership_before", default=None)


def on_membership_changed(
    sender: type, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, using: str, **kwargs: Any
) -> None:
    """m2m_changed receiver for `User.groups.through`: audit what actually changed.

    `reverse` is False for `user.groups.*` (instance is a user, pk_set group ids)
    and True for `group.user_set.*` (instance is a group, pk_set user ids).
    """
    if action == "pre_add":
        _gate_additions(instance, reverse, pk_set or set())
    elif action == "pre_remove":
        _remember(instance, "remove", _linked(sender, instance, reverse, using, only=pk_set or set()))
    elif action == "pre_clear":
        _remember(instance, "clear", _linked(sender, instance, reverse, using))
    elif action == "post_add":
        _audit(_changes(instance, reverse, added=pk_set or set()))
    elif action == "post_remove":
        _audit(_changes(instance, reverse, removed=_recall(instance, "remove")))
    elif action == "post_clear":
        _audit(_changes(instance, reverse, removed=_recall(instance, "clear")))


def _approver() -> Actor | None:
    from approvals.policy.membership_gate import membership_approved_by

    return membership_approved_by()


def _gate_additions(instance: Any, reverse: bool, pk_set: set[int]) -> None:
    """Refuse, on a page, the admin or the API, an addition that gives someone decide on
    something (or makes a risk-admin) without a second risk-admin's approval.

    Removing people only narrows, so it is never gated. Commands and shells are the
    operator's deploy-time tools and identity-provider claims are deploy-time
    configuration (`controlplane.accounts.sso`, which never adds risk-admins): both
    are audited, not gated. The admin turns such an addition into a proposal before it
    reaches this check (`approvals.admin`); this is the net under every other path.
    """
    from django.conf import settings

    if not pk_set or not settings.POLICY_FOUR_EYES or _approver() is not None:
        return
    _actor, via = current_actor()
    if via not in GATED_VIA:
        return
    from approvals.errors import NOT_PERMITTED
    from approvals.policy.checks import PolicyError
    from approvals.policy.membership_gate import membership_waits_because

    if reverse:
        additions = {instance.name: set(pk_set)}
    else:
        additions = {name: {instance.pk} for name in Group.objects.filter(pk__in=pk_set).values_list("name", flat=True)}
    waits = membership_waits_because(additions)
    if waits is not None:
        raise PolicyError(
            NOT_PERMITTED, f"Not added: {waits}. Propose it in the admin, where a second risk-admin approves it."
        )


def connect() -> None:
    """Connect the receiver (idempotent); called from ApprovalsConfig.ready()."""
    m2m_changed.connect(on_membership_changed, sender=get_user_model().groups.through, dispatch_uid=DISPATCH_UID)


def _linked(
    sender: type[Model], instance: Any, reverse: bool, using: str, *, only: Iterable[int] | None = None
) -> frozenset[int]:
    """Ids on the other side currently linked to `instance` (restricted to `only`).

    `.remove()` may name people who are not members; only real members are removed.
    """
    groups_field = get_user_model()._meta.get_field("groups")
    user_column = _attname(sender, groups_field.m2m_field_name())
    group_column = _attname(sender, groups_field.m2m_reverse_field_name())
    mine, theirs = (group_column, user_column) if reverse else (user_column, group_column)
    links = sender._default_manager.using(using).filter(**{mine: instance.pk})
    if only is not None:
        links = links.filter(**{f"{theirs}__in": list(only)})
    return frozenset(links.values_list(theirs, flat=True))


def _attname(model: type[Model], name: str) -> str:
    """The attribute holding one concrete field's column (a through table's foreign keys)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field):
        raise TypeError(f"{model.__name__}.{name} is a relation's reverse side, not a column")
    return field.attname


def _remember(instance: Any, operation: str, ids: frozenset[int]) -> None:
    before = _before.get()
    if before is None:
        before = {}
        _before.set(before)
    before[(id(instance), operation)] = ids


def _recall(instance: Any, operation: str) -> frozenset[int]:
    before = _before.get() or {}
    return before.pop((id(instance), operation), frozenset())


def _changes(
    instance: Any, reverse: bool, *, added: Iterable[int] = (), removed: Iterable[int] = ()
) -> dict[int, _GroupChange]:
    """Group id -> the user ids added to and removed from it."""
    changes: dict[int, _GroupChange] = defaultdict(_GroupChange)
    if reverse:
        if added or removed:
            change = changes[instance.pk]
            change.added.update(added)
            change.removed.update(removed)
    else:
        for group_id in added:
            changes[group_id].added.add(instance.pk)
        for group_id in removed:
            changes[group_id].removed.add(instance.pk)
    return {group_id: change for group_id, change in changes.items() if change.added or change.removed}


def _audit(changes: dict[int, _GroupChange]) -> None:
    """Record one event per group, in the caller's transaction."""
    if not changes:
        return
    actor, via = current_actor()
    groups = Group.objects.in_bulk(list(changes))
    user_ids = set().union(*(change.added | change.removed for change in changes.values()))
    User = get_user_model()
    usernames = dict(User._default_manager.filter(pk__in=user_ids).values_list("pk", User.USERNAME_FIELD))
    # Joins the caller's change if there is one; otherwise appends inside the
    # transaction the m2m manager opened around this signal, so both commit together.
    with applying():
        for group_id in sorted(changes):
            change = changes[group_id]
            group = groups.get(group_id)
            record(
                VERB,
                actor=actor,
                metadata={
                    "group": group.name if group is not None else "",
                    "group_id": group_id,
                    "added": _people(change.added, usernames),
                    "removed": _people(change.removed, usernames),
                    "via": via,
                },
            )


def _people(user_ids: set[int], usernames: dict[int, str]) -> list[dict[str, Any]]:
    return [{"id": user_id, "username": usernames.get(user_id, "")} for user_id in sorted(user_ids)]
