"""Deadlines: persisting expiries, the sweeper, and a reviewer's one-time extension."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from audit.chain import digest, record

from .. import errors
from ..errors import DomainError
from ..models import ApprovalRequest, DeadlineExtension, RuleNotification
from ..people import Person
from .core import RequestId, announce, changing
from .guards import expire_if_due, require_may_decide, require_pending

__all__ = ["expire", "expire_overdue", "extend_decision_deadline"]


def expire(request_id: RequestId) -> bool:
    """Persist an expiry whose deadline has passed; False when nothing was due."""
    with changing(request_id) as request:
        return expire_if_due(request) is not None


def expire_overdue(*, now: datetime | None = None, limit: int = 500) -> int:
    """The sweeper's entry point: expire what is overdue, one short transaction each."""
    now = now or timezone.now()
    overdue = list(ApprovalRequest.objects.overdue_for_decision(now).values_list("pk", flat=True)[:limit]) + list(
        ApprovalRequest.objects.overdue_for_execution(now).values_list("pk", flat=True)[:limit]
    )
    return sum(expire(pk) for pk in overdue)


def extend_decision_deadline(
    request_id: RequestId, *, actor: Person, seconds: int, reason: str = ""
) -> ApprovalRequest:
    """Push a pending request's `decide_by` back by `seconds`, once per request,
    within its rule's `max_extension_seconds` (approvals.models.RuleNotification).

    Only someone who may decide the request may extend it. Raises DomainError:
    ``not_permitted`` (403), ``extension_not_allowed`` (the rule allows none, or
    `seconds` is outside 1..limit; 422), ``already_extended`` (409), or the usual
    state refusals; a deadline already passed is persisted as an expiry first.
    """
    with changing(request_id) as request:
        require_pending(request)
        require_may_decide(request, actor)
        limit = (
            RuleNotification.objects.filter(rule_name=request.rule_name)
            .values_list("max_extension_seconds", flat=True)
            .first()
            if request.rule_name
            else None
        ) or 0
        if limit <= 0:
            raise DomainError(errors.EXTENSION_NOT_ALLOWED, "This request's rule allows no deadline extension.")
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= limit:
            raise DomainError(
                errors.EXTENSION_NOT_ALLOWED, f"An extension must be between 1 and {limit} seconds.", limit=limit
            )
        if DeadlineExtension.objects.filter(request=request).exists():
            raise DomainError(errors.ALREADY_EXTENDED, "The deadline of this request was already extended once.")
        previous = request.decide_by
        if previous is None:
            raise DomainError(errors.EXTENSION_NOT_ALLOWED, "This request has no decision deadline to extend.")
        request.decide_by = previous + timedelta(seconds=seconds)
        request.save(update_fields=["decide_by"])
        DeadlineExtension.objects.create(
            request=request,
            extended_by=actor.user,
            extended_by_label=actor.label,
            previous_decide_by=previous,
            new_decide_by=request.decide_by,
            reason=reason,
        )
        record(
            "request.deadline_extended",
            actor=actor,
            request=request,
            metadata={
                "from": previous.isoformat(),
                "to": request.decide_by.isoformat(),
                "seconds": seconds,
                "reason": digest(reason),
            },
        )
        announce(request, "request.deadline_extended", decide_by=request.decide_by.isoformat())
    return request
