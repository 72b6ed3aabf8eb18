"""A reviewer's reply in place of the tool (LangChain HITL's `respond` decision).

Some tools are really questions for a person ("ask the user"), and sometimes a
reviewer would rather tell the model something than run the call or reject it. A
reply ends the request as `rejected` (the tool never runs; nothing can claim it)
and the agent resumes with `{action: "responded", message}`: its host hands the
message to the model as the tool's result.

Decided like a rejection, on purpose: a reply cannot make anything run, so it needs
no step-up and no quorum (one reply is final), and the agent's owner and the person
it acts for may give it, as they may reject. It still must be at the revision the
reviewer saw, and only where the submission allows `respond`. The audit log records
the move as `request.responded`, not `request.rejected`: who answered the model in
place of the tool, with a digest of the words.
"""

from __future__ import annotations

from django.utils import timezone

from audit.chain import digest
from controlplane.http.codes import VALIDATION_ERROR

from .. import errors
from ..errors import DomainError
from ..models import ApprovalRequest, Decision
from ..people import Person
from ..states import State
from .core import RequestId, changing, transition
from .guards import require_allowed, require_may_decide, require_pending
from .votes import _record_vote, _require_revision, require_revision_given

__all__ = ["RESPONDED", "respond_instead"]

# `resolution_code` of a request answered by a reply; the resume payload reads it.
RESPONDED = "responded"
# As long as the API lets feedback be; the page's form is held to it here.
MAX_REPLY_CHARS = 10_000


def respond_instead(request_id: RequestId, message: str, *, actor: Person, revision: int | None) -> ApprovalRequest:
    """End the pending action with `message` as what the agent's model reads instead of the tool's result.

    `revision`: the revision the reviewer replied to (required: 422 `revision_required`).
    """
    revision = require_revision_given(revision)
    if not message.strip():
        raise DomainError(errors.REPLY_REQUIRED, "Write the reply the agent's model should read.")
    if len(message) > MAX_REPLY_CHARS:
        raise DomainError(VALIDATION_ERROR, f"A reply is limited to {MAX_REPLY_CHARS} characters.", fields=["message"])
    with changing(request_id) as request:
        require_pending(request)
        _require_revision(request, revision)
        require_may_decide(request, actor)
        require_allowed(request, "respond")
        _record_vote(request, actor, Decision.Verdict.RESPOND, message)
        transition(
            request,
            State.REJECTED,
            actor=actor,
            verb="request.responded",
            metadata={"revision": request.current_revision, "reply": digest(message)},
            decided_at=timezone.now(),
            decided_by_label=actor.label,
            resolution_code=RESPONDED,
            feedback=message,
        )
    return request
