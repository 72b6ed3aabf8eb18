"""One change, one transaction: the primitive every state change builds on.

A change of a request opens `approvals.services.core.changing(request_id)`; a change of
anything else (an emergency switch, a policy version or proposal, a rule's notification
settings, an agent's token, a group's membership) opens `applying()`, or
`changing_row(...)` to also lock the one row it changes. Either way the change is:

- one `audited_atomic()` transaction;
- the row(s) it changes locked (`select_for_update`) before its guards read them, so
  two racing changes run one after the other and the second sees the first;
- its audit events recorded (`audit.chain.record`) inside it: they commit with the
  change or vanish with it;
- its side effects (socket pushes and closes, the domain signal) scheduled with
  `after_commit`: they run once the transaction commits, never for one that rolled
  back, and a failing one is logged, never raised into the caller whose change is
  already committed.

A `DomainError` raised inside rolls everything back. A `PersistedRefusal` is the one
exception: what was written before it commits, then the refusal reaches the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import models, transaction

from audit.chain import audited_atomic

from .errors import DomainError

__all__ = ["PersistedRefusal", "after_commit", "applying", "changing_row", "lock_row"]

logger = logging.getLogger(__name__)

Row = TypeVar("Row", bound=models.Model)


class PersistedRefusal(DomainError):
    """A refusal whose writes so far are committed before the caller sees it.

    Raise it inside `applying()` (or `changing()`, `changing_row()`) when time or a
    check already decided something that must stay decided whatever the caller does
    next: the deadline passed (the request is now expired), re-validation failed (the
    request is now failed), a wrong step-up was audited, a proposal went stale.
    """


@contextmanager
def applying() -> Iterator[None]:
    """One change in one transaction; see the module docstring.

    Nested inside another change it joins that change's transaction (and its refusal
    reaches the outer block, which commits or rolls back as a whole).
    """
    refusal: PersistedRefusal | None = None
    with audited_atomic():
        try:
            yield
        except PersistedRefusal as error:
            refusal = error
    if refusal is not None:
        raise refusal


def lock_row(
    rows: type[Row] | models.QuerySet[Row], *, create: Mapping[str, Any] | None = None, **lookup: Any
) -> Row | None:
    """The row `lookup` names, locked for the rest of the transaction (None: there is none).

    `create`: insert it with these defaults when it does not exist yet (a unique
    `lookup` makes a racing insert fail instead of making two). Call inside a change.
    """
    queryset = (rows if isinstance(rows, models.QuerySet) else rows._default_manager.all()).select_for_update()
    if create is not None:
        row, _ = queryset.get_or_create(defaults=dict(create), **lookup)
        return row
    return queryset.filter(**lookup).first()


@contextmanager
def changing_row(
    rows: type[Row] | models.QuerySet[Row],
    *,
    missing: Callable[[], Exception] | None = None,
    create: Mapping[str, Any] | None = None,
    **lookup: Any,
) -> Iterator[Row]:
    """`applying()` with the row `lookup` names locked (`lock_row`) for the whole block.

    No such row: `missing()` is raised (by default the model's DoesNotExist).
    """
    with applying():
        row = lock_row(rows, create=create, **lookup)
        if row is None:
            model: Any = rows.model if isinstance(rows, models.QuerySet) else rows
            raise missing() if missing is not None else model.DoesNotExist(f"No {model.__name__} matches {lookup}.")
        yield row


def after_commit(effect: Callable[[], object], *, what: str) -> None:
    """Run `effect` once the current transaction commits (at once outside one).

    Side effects are at-most-once (screens resync, sockets re-check their principal):
    a failing effect is logged as `what` and never fails the committed change, nor the
    effects scheduled after it.
    """

    def run() -> None:
        try:
            effect()
        except Exception:
            logger.warning("could not send %s", what, exc_info=True)

    transaction.on_commit(run)
