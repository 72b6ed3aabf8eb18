"""Revealing one masked param to a reviewer who may decide the request.

A rule masks a param (an email body, say) so it does not sit in every reviewer's
view, notification and API answer; a reviewer who must decide may still need to
read it. Each reveal is an audit event naming the field, never its value, so
"who read the body" has an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit.chain import audited_atomic, record

from .. import errors
from ..errors import DomainError
from ..models import ApprovalRequest
from ..people import Person
from ..states import State
from .guards import require_may_decide

__all__ = ["Revealed", "reveal_field"]


@dataclass(frozen=True)
class Revealed:
    """What the reviewer may now read: the param's value in the current revision."""

    field: str
    value: Any
    revision: int


def reveal_field(request_id, path: Any, *, actor: Person) -> Revealed:
    """The current value of the masked param `path` of the request, for `actor`.

    The guard is deciding's own (`require_may_decide`: the object permission through
    the request's group or an escalation), so a reviewer who could approve the call
    blind can read what they approve, and nobody else can. `path` is a top-level
    param name the request's rule masks; anything else (an unmasked or missing
    param, a dotted or `../` path, a non-string) is 422 `field_not_masked`, so
    the endpoint never becomes a way to read params by another route.
    Only while the request awaits a decision (409 `illegal_transition` after).
    Raises DomainError: 404 `not_found`, 403 `not_permitted`, 409 `illegal_transition`,
    422 `field_not_masked`.
    """
    with audited_atomic():
        request = ApprovalRequest.objects.select_related("agent").filter(pk=request_id).first()
        if request is None:
            raise DomainError(errors.NOT_FOUND, "No such approval request.")
        require_may_decide(request, actor)
        # A reveal serves a decision still to make; once decided (or expired) the value
        # has no reader left to inform, only one more place to leak from.
        if request.effective_state != State.PENDING_APPROVAL:
            raise DomainError(errors.ILLEGAL_TRANSITION, "Masked params can be revealed only while the request "
                              "awaits a decision.", state=request.effective_state)
        masked = (request.classification or {}).get("masked_params") or ()
        if not isinstance(path, str) or path not in masked:
            raise DomainError(errors.FIELD_NOT_MASKED, "That is not a masked parameter of this request.",
                              field="field")
        params = request.current_params()
        if path not in params:
            raise DomainError(errors.FIELD_NOT_MASKED, "The agent did not set that parameter.", field="field")
        record("request.field_revealed", actor=actor, request=request,
               metadata={"field": path, "revision": request.current_revision})
    return Revealed(field=path, value=params[path], revision=request.current_revision)
