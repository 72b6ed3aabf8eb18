"""The passkey (or identity provider) challenge for the decision a card's form is about
to send (DESIGN.md "A decision names what it decides"): static/js/passkey.js posts the
form's own fields here before it posts them to the form's action, so the proof binds
exactly what that form decides."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from controlplane.http.codes import VALIDATION_ERROR

from .. import decide, services
from ..api.challenges import challenge
from ..errors import DomainError
from .views import _decidable

__all__ = ["step_up_challenge"]


_CHALLENGE_VERDICTS = {"approve": decide.APPROVE, "edit": decide.EDIT, "respond": decide.RESPOND}


@login_required
@require_POST
def step_up_challenge(request: HttpRequest, pk) -> JsonResponse:
    """The passkey (or identity provider) challenge for the decision a card's form is
    about to send: the page's script posts the form's own fields here, with `decision`
    (approve, edit or respond), before it posts them to the form's action. The form is
    read exactly as the decision will read it (`decide.read_decision`), so the proof
    binds that revision and those edits or that answer and nothing else (DESIGN.md "A
    decision names what it decides"). 404 for a request not in the reviewer's queue;
    422 `revision_required` without a revision."""
    verdict = _CHALLENGE_VERDICTS.get(request.POST.get("decision", ""))
    target = _decidable(request, pk, full=verdict == decide.EDIT)
    try:
        services.require_revision_given(decide.form_revision(request.POST))
        if verdict is None:
            raise DomainError(VALIDATION_ERROR, "decision is approve, edit or respond.", fields=["decision"])
        decision = decide.read_decision(request.POST, target, verdict=verdict)
        confirmed = (
            decision.confirmed()
            if verdict != decide.RESPOND or decision.answers_a_suspension
            else services.answer_decision(decision.request_id, decision.revision, decide.form_answer(request.POST))
        )
        body = challenge(request.user, services.decision_digest([confirmed]), rp_id=decide.rp_id_of(request))
    except DomainError as error:
        return JsonResponse(error.as_dict(), status=error.http_status)
    return JsonResponse(body)
