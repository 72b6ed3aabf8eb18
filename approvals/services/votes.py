"""One reviewer's vote and what follows from it, shared by every way of deciding (approve,
reject, approve with edits, an answer to a suspension, a reply): the revision the decision
names, the bounded size of its input, the vote's row and audit event, and the approval once
the quorum stands. The callers hold the request's row lock.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone

from audit.chain import digest, record
from controlplane.http.codes import VALIDATION_ERROR
from controlplane.http.fields import json_size

from .. import errors
from ..errors import DomainError
from ..models import ApprovalRequest, Decision
from ..people import Person
from ..states import State
from .core import announce, transition
from .execution import server_executor
from .guards import (
    approvals_counted,
)

if TYPE_CHECKING:
    pass


APPROVE = Decision.Verdict.APPROVE
REJECT = Decision.Verdict.REJECT
# As long as the API lets feedback be (approvals/api/serializers.py); the page's forms are
# held to it here, before any lock is taken.
MAX_FEEDBACK_CHARS = 10_000


def _require_bounded_input(feedback: str, edits: dict[str, Any] | None = None) -> None:
    """Feedback and edits within the API's sizes, whichever path they came through (422)."""
    if len(feedback) > MAX_FEEDBACK_CHARS:
        raise DomainError(
            VALIDATION_ERROR, f"Feedback is limited to {MAX_FEEDBACK_CHARS} characters.", fields=["feedback"]
        )
    if edits is not None and json_size(edits) > settings.API_MAX_PARAMS_BYTES:
        raise DomainError(
            VALIDATION_ERROR, f"Edits are limited to {settings.API_MAX_PARAMS_BYTES} bytes as JSON.", fields=["edits"]
        )


def require_revision_given(revision: object) -> int:
    """Every decision names the revision it was made on (DESIGN.md "A decision names
    what it decides"): none, or something that is no revision number, is 422
    `revision_required`, before anything is locked or read. Returns the revision.

    The services take `revision: int | None` on purpose: a surface passes what it read
    (None when the reviewer's input named none) and the refusal is the core's, not the
    surface's, so no surface can decide without one by forgetting a check."""
    if type(revision) is not int or revision < 1:
        raise DomainError(
            errors.REVISION_REQUIRED,
            "Say which revision you decided on: send `revision` (the API also takes If-Match).",
            fields=["revision"],
        )
    return revision


def _require_revision(request: ApprovalRequest, revision: int) -> None:
    require_revision_given(revision)
    if revision != request.current_revision:
        raise DomainError(
            errors.REVISION_CHANGED,
            f"The request is at revision {request.current_revision} now, not {revision}; look at it again.",
            revision=request.current_revision,
        )


def _record_vote(
    request: ApprovalRequest, actor: Person, verdict: str, feedback: str, *, step_up_method: str = ""
) -> None:
    if Decision.objects.filter(request=request, revision=request.current_revision, reviewer=actor.user).exists():
        raise DomainError(errors.ALREADY_VOTED, "You already decided this revision.")
    Decision.objects.create(
        request=request,
        revision=request.current_revision,
        reviewer=actor.user,
        verdict=verdict,
        feedback=feedback,
        step_up_method=step_up_method,
    )
    record(
        "decision.recorded",
        actor=actor,
        request=request,
        metadata={
            "revision": request.current_revision,
            "verdict": verdict,
            "feedback": digest(feedback),
            **({"step_up": step_up_method} if step_up_method else {}),
            **(
                {"step_up_credential": actor.step_up.credential_id}
                if step_up_method and getattr(actor.step_up, "credential_id", "")
                else {}
            ),
        },
    )


def _approve_if_quorum(request: ApprovalRequest, actor: Person) -> None:
    counted = approvals_counted(request)
    if counted < request.required_approvals:
        announce(request, "decision.recorded", approvals=counted, required=request.required_approvals)
        return
    now = timezone.now()
    window = request.classification.get("execution_window_seconds", settings.DEFAULT_EXECUTION_WINDOW_SECONDS)
    transition(
        request,
        State.APPROVED,
        actor=actor,
        metadata={"revision": request.current_revision, "approvals": counted},
        decided_at=now,
        decided_by_label=actor.label,
        resolution_code="approved",
        execute_by=now + timedelta(seconds=window),
        executor=server_executor(request),
    )
