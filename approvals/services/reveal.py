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
from ..masking import masked_paths
from ..models import ApprovalRequest
from ..people import Person
from ..permissions import can_decide
from ..states import State
from .core import RequestId
from .guards import require_may_decide

__all__ = ["Revealed", "allow_masked_probe", "may_reveal", "reveal_field"]


@dataclass(frozen=True)
class Revealed:
    """What the reviewer may now read: the param's value in the current revision."""

    field: str
    value: Any
    revision: int


def reveal_field(request_id: RequestId, path: Any, *, actor: Person) -> Revealed:
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
            raise errors.no_such_request()
        require_may_decide(request, actor)
        # A reveal serves a decision still to make; once decided (or expired) the value
        # has no reader left to inform, only one more place to leak from.
        if request.effective_state != State.PENDING_APPROVAL:
            raise DomainError(
                errors.ILLEGAL_TRANSITION,
                "Masked params can be revealed only while the request awaits a decision.",
                state=request.effective_state,
            )
        masked = (request.classification or {}).get("masked_params") or ()
        if not isinstance(path, str) or path not in masked:
            raise DomainError(errors.FIELD_NOT_MASKED, "That is not a masked parameter of this request.", field="field")
        params = request.current_params()
        if path not in params:
            raise DomainError(errors.FIELD_NOT_MASKED, "The agent did not set that parameter.", field="field")
        record(
            "request.field_revealed",
            actor=actor,
            request=request,
            metadata={"field": path, "revision": request.current_revision},
        )
    return Revealed(field=path, value=params[path], revision=request.current_revision)


def may_reveal(request: ApprovalRequest, actor: Person | None) -> bool:
    """Whether `actor` holds reveal permission on `request`: the one `reveal_field`
    checks (they may decide it, and it still awaits a decision). Holding it never
    unmasks a surface by itself; each read of a value goes through an audited path."""
    if actor is None or getattr(actor, "user", None) is None or not actor.user.is_authenticated:
        return False
    return request.effective_state == State.PENDING_APPROVAL and can_decide(actor.user, request)


def allow_masked_probe(request_id: RequestId, paths: list[str], *, actor: Person) -> ApprovalRequest:
    """Let `actor` evaluate rule conditions reading masked values of a real request
    (the rule tester; `paths` are the conditions' paths, e.g. ``params.body``, from
    `masking.reads_masked`), and audit it as `rules.masked_probe` naming the paths,
    never the values.

    A condition on a masked param is an oracle for its value (a pattern, a
    comparison, a length), so it needs reveal permission on the request
    (`may_reveal`); anyone else gets 403 `masked_probe_refused` and nothing is
    recorded. Raises DomainError: 404 `not_found`, 403 `masked_probe_refused`.
    """
    with audited_atomic():
        request = ApprovalRequest.objects.select_related("agent").filter(pk=request_id).first()
        if request is None:
            raise errors.no_such_request()
        named = sorted({path for path in paths if isinstance(path, str)})
        if not masked_paths(request) or not named:  # nothing masked is read: the caller's bug
            raise DomainError(errors.FIELD_NOT_MASKED, "The test reads no masked parameter of this request.")
        if not may_reveal(request, actor):
            raise DomainError(
                errors.MASKED_PROBE_REFUSED,
                f"This test reads masked values of the request ({', '.join(named)}); only someone who may "
                "decide it, while it is pending, may run it on them. Test it on a sample instead.",
                fields=named,
            )
        record(
            "rules.masked_probe",
            actor=actor,
            request=request,
            metadata={"fields": named, "revision": request.current_revision},
        )
    return request
