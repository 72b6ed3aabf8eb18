"""Suspensions: a reviewer's typed answer to a paused workflow step (DESIGN.md
"Agent-facing contract", suspensions).

The answer is the decision. The first answer becomes the proposal, as a new revision
of the request (the params, the suspend payload, stay as they were); under a quorum the
others approve it (agree), answer it the same way (agree), or reject it. A different
answer replaces the proposal as the next revision, so the approvals given for the old
one stop counting: the count restarts. This mirrors approve-with-edits
(`decisions.approve_with_edits`, `is_proposal`): an answer from someone whose approval
cannot count (separation of duties, emergency stop) stands as a proposal only.

Every guard of a decision applies, under the row lock: pending, the revision the
reviewer saw, decide permission, step-up where the level or rule asks for it (over
(request, revision seen, "respond", digest of the answer)). The answer is validated
against the stored resume schema (`approvals.resume_schema`) before the row lock is
taken, so no answer, however large or hostile, holds the lock while it is checked.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError

from audit.chain import digest, record

from .. import errors
from ..emergency import is_stopped
from ..errors import DomainError
from ..models import ApprovalRequest, Decision, ParamsRevision
from ..people import Person
from ..permissions import excluded_from_approving
from ..resume_schema import validate_resume_data
from ..states import Kind, State
from .core import RequestId, announce, changing
from .guards import require_may_decide, require_pending, rule_asks_step_up
from .step_up import payload_digest, require_step_up
from .votes import _approve_if_quorum, _record_vote, _require_revision, require_revision_given

__all__ = ["RESPOND", "answer_decision", "answer_of", "respond_to_suspension"]

# The verdict a step-up proof for an answer is made over, with the answer's digest.
RESPOND = "respond"


def answer_decision(request_id: RequestId, revision: int | None, answer: Any) -> tuple[str, int, str, str]:
    """What a step-up proof for giving `answer` at `revision` binds: the request, the
    revision the reviewer saw, the verdict and the digest of exactly this answer."""
    return (str(request_id), require_revision_given(revision), RESPOND, payload_digest(answer))


def answer_of(request: ApprovalRequest) -> dict[str, Any] | None:
    """The answer proposed for the current revision (the answer itself once approved),
    with its values and key order exactly as validated; None before anyone answered."""
    return json.loads(request.resume_data_json) if request.resume_data_json else None


def _same_answer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # Compared as canonical JSON, not with ==: in Python True == 1 == 1.0, in JSON they differ.
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def respond_to_suspension(
    request_id: RequestId, *, actor: Person, resume_data: Any, revision: int | None, feedback: str = ""
) -> ApprovalRequest:
    """Record `actor`'s answer to a pending suspension; approve it once the quorum agrees.

    `revision`: the revision the reviewer looked at (the proposal they saw; required:
    422 `revision_required`); if the request moved on since, nothing is recorded
    (`revision_changed`). A step-up proof must be made for exactly this answer at that
    revision (`answer_decision`).

    Raises DomainError: `not_a_suspension`, `invalid_resume_data` (422, naming the
    failing path), and every refusal of a decision (`revision_changed`,
    `not_permitted`, `step_up_required`, `already_voted`, ...).
    """
    revision = require_revision_given(revision)
    schema = _validated_before_the_lock(request_id, resume_data)
    with changing(request_id) as request:
        if request.kind != Kind.SUSPENSION:
            raise DomainError(errors.NOT_A_SUSPENSION, "Only a suspension is answered with resume_data.")
        require_pending(request)
        _require_revision(request, revision)
        require_may_decide(request, actor)
        if request.resume_schema_json != schema:  # never changes after submission; if it ever did, check again
            stored = request.resume_schema
            if stored is None:  # every suspension is submitted with one; none is nothing to answer against
                raise DomainError(errors.NOT_A_SUSPENSION, "Only a suspension is answered with resume_data.")
            validate_resume_data(stored, resume_data)
        proposed = answer_of(request)
        agrees = proposed is not None and _same_answer(proposed, resume_data)
        counts = actor.user.pk not in excluded_from_approving(request) and not is_stopped(request.agent)
        method = ""
        if counts:
            method = require_step_up(
                request,
                actor,
                decision=answer_decision(request.pk, request.current_revision, resume_data),
                risk_level=request.risk_level,
                rule_asks=rule_asks_step_up(request),
            )
        if not agrees:
            _propose(request, actor, resume_data)
        record(
            "suspension.answered",
            actor=actor,
            request=request,
            metadata={
                "revision": request.current_revision,
                "answer": digest(resume_data),
                "proposal": "agreed" if agrees else "replaced" if proposed is not None else "new",
                "counts": counts,
            },
        )
        if counts:
            _record_vote(request, actor, Decision.Verdict.APPROVE, feedback, step_up_method=method)
            _approve_if_quorum(request, actor)
        else:
            announce(request, "suspension.answered")
    return request


def _validated_before_the_lock(request_id: RequestId, resume_data: Any) -> Any:
    """Validate the answer against the stored schema without holding the request's row
    lock (DESIGN.md "Patterns run in linear time"): a slow or hostile answer never
    holds the lock, and every decision waiting on it. The schema is written once, at
    submission; the guards under the lock check it is still the one validated against.
    Returns the schema's stored text (None for no such suspension: the locked read
    then refuses)."""
    try:
        found = (
            ApprovalRequest.objects.filter(pk=getattr(request_id, "pk", request_id))
            .values_list("kind", "state", "resume_schema_json")
            .first()
        )
    except (ValueError, ValidationError):  # not an id at all: the locked read answers it as missing
        return None
    if found is None:
        return None
    kind, state, schema = found
    if kind != Kind.SUSPENSION or state != State.PENDING_APPROVAL or not schema:
        return None  # the locked read refuses it (or, had it just become pending, validates it there)
    validate_resume_data(json.loads(schema), resume_data)
    return schema


def _propose(request: ApprovalRequest, actor: Person, answer: dict[str, Any]) -> None:
    """The answer becomes the next revision: approvals of the previous proposal stop counting."""
    params = request.current_params()
    request.current_revision += 1
    ParamsRevision.objects.create(
        request=request,
        number=request.current_revision,
        params=params,
        created_by=actor.user,
        changed_keys=[],
        risk_level=request.risk_level,  # the params did not change; the answer did
    )
    # ensure_ascii=False keeps the text as sent; json.loads gives back equal values in this order.
    request.resume_data_json = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    request.save(update_fields=["current_revision", "resume_data_json"])
