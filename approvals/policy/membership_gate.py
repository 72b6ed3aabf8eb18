"""Four eyes on the membership of groups that can decide (DESIGN.md "Who may decide is policy").

Adding a person to a group gives them whatever that group decides, so it is judged by
the same all-or-nothing test as a rule change (`approvals.policy.authority`): when it
gives anyone decide on anything (or makes a risk-admin) it waits for a second
risk-admin. The Django admin turns such an addition into a proposal
(`propose_membership`); the membership receiver (`controlplane.accounts.membership`)
refuses it on every other page or API; approving applies it inside
`approving_membership`, which that receiver lets through and attributes to the approver.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from audit.chain import Actor

from ..atomic import applying
from ..models import PolicyProposal, PolicyVersion
from .authority import group_members, waits_because
from .changes import rules_and_verbs
from .checks import PROPOSAL_STALE, PolicyError, audit_actor
from .pending import Kind, propose

__all__ = [
    "apply_membership",
    "approving_membership",
    "membership_approved_by",
    "membership_waits_because",
    "propose_membership",
]

_approver: ContextVar[Actor | None] = ContextVar("membership_approver", default=None)


@contextmanager
def approving_membership(actor: Actor) -> Iterator[None]:
    """Membership added inside the block was approved by `actor`, a second risk-admin."""
    token = _approver.set(actor)
    try:
        yield
    finally:
        _approver.reset(token)


def membership_approved_by() -> Actor | None:
    """The second risk-admin whose approval is being applied right now, if any."""
    return _approver.get()


def membership_waits_because(additions: Mapping[str, set[int]]) -> str | None:
    """Why adding these people (group name -> user ids) needs a second risk-admin, or None."""
    rules, verbs = rules_and_verbs(PolicyVersion.objects.order_by("-number").first())
    return waits_because(rules, verbs, user=None, members=group_members(additions))


def propose_membership(
    group: Group, users: Iterable[Any], *, acting_user: Any, note: str = ""
) -> PolicyProposal | None:
    """Propose adding `users` to `group` when that needs a second risk-admin (the pending
    proposal is returned); None when adding them grants nothing and may apply at once."""
    users = sorted(users, key=lambda user: user.pk)
    ids = [user.pk for user in users]
    waits = membership_waits_because({group.name: set(ids)})
    if waits is None:
        return None
    names = [user.get_username() for user in users]
    diff = {"added": [], "removed": [], "changed": {}, "membership": {group.name: {"added": names}}}
    with applying():
        return propose(
            Kind.MEMBERSHIP,
            {"group": group.name, "add": ids, "usernames": names},
            acting_user=acting_user,
            waits=waits,
            diff=diff,
            note=(note or "").strip() or f"Add {', '.join(names)} to {group.name}",
        )


def apply_membership(proposal: PolicyProposal, approver: Any) -> None:
    """Add the proposal's people to its group, `approver` acting (inside the approval's transaction)."""
    payload = proposal.payload
    group = Group.objects.filter(name=payload["group"]).first()
    if group is None:
        raise PolicyError(PROPOSAL_STALE, f"The group {payload['group']!r} no longer exists.")
    with approving_membership(audit_actor(approver)):
        group.user_set.add(*get_user_model().objects.filter(pk__in=payload["add"], is_active=True))
