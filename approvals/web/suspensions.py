"""The card's answer to a suspension: the form generated from its resume schema
(static/js/schema_form.js) posts `resume_data` as JSON text here, with the revision
the card showed and any step-up, exactly like the approve and reject forms.

The service validates the answer against the stored schema (the browser's live check
is a convenience; the server is authoritative) and checks every guard.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from controlplane.http.errors import CodedError
from controlplane.http.inputs import parse_json_text

from .. import services
from ..errors import DomainError
from ..resume_schema import INVALID_RESUME_DATA
from ..states import State
from .views import _decided_message, _outcome, _refused, _reviewer, _revision

__all__ = ["answer", "answer_text"]


def answer_text(request: HttpRequest):
    """The form's `resume_data`, parsed as the decision parses it (views.step_up_challenge binds a proof to it)."""
    return _answer(request)


def _answer(request: HttpRequest):
    try:
        return parse_json_text(request.POST.get("resume_data", ""), field="resume_data")
    except ValueError:
        raise DomainError(INVALID_RESUME_DATA, "The answer is not valid JSON.", path="", field="resume_data") from None
    except CodedError as refused:
        raise DomainError(INVALID_RESUME_DATA, refused.message, path="", field="resume_data") from None


def answer(request: HttpRequest, target) -> HttpResponse:
    """The card's `respond` on a suspension (views.respond routes it here by kind)."""
    try:
        decided = services.respond_to_suspension(
            target.pk, actor=_reviewer(request), resume_data=_answer(request), revision=_revision(request),
            feedback=request.POST.get("feedback", ""),
        )
    except DomainError as error:
        return _refused(request, error)
    if decided.state == State.PENDING_APPROVAL and services.is_proposal(decided, by=request.user):
        return _outcome(request, ok=True, state=decided.state, proposal=True,
                        message="Your answer is saved as a proposal: your approval does not count for it, "
                                "the other approvers must agree.")
    return _outcome(request, ok=True, state=decided.state, message=_decided_message(decided, "answer"))
