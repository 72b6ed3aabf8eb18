"""The passkey (or identity provider) challenge for the decision a card's form is about
to send (DESIGN.md "A decision names what it decides"): static/js/passkey.js posts the
form's own fields here before it posts them to the form's action, so the proof binds
exactly what that form decides."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from controlplane.http.codes import VALIDATION_ERROR

from .. import services
from ..api.step_up import challenge
from ..errors import DomainError
from ..permissions import decidable_by
from .suspensions import answer_text
from .views import _decidable, _parse_edits, _revision

__all__ = ["step_up_challenge"]


_CHALLENGE_VERDICTS = ("approve", "edit", "respond")


@login_required
@require_POST
def step_up_challenge(request: HttpRequest, pk) -> JsonResponse:
    """The passkey (or identity provider) challenge for the decision a card's form is
    about to send: the page's script posts the form's own fields here, with `decision`
    (approve, edit or respond), before it posts them to the form's action. The edits
    and the answer are read exactly as the decision will read them (`_parse_edits`,
    the suspension form's `resume_data`), so the proof binds that revision and those
    edits or that answer and nothing else (DESIGN.md "A decision names what it decides").
    404 for a request not in the reviewer's queue; 422 `revision_required` without a revision."""
    target = _decidable(request, pk)
    verdict = request.POST.get("decision", "")
    try:
        revision = _revision(request)
        services.require_revision_given(revision)
        if verdict not in _CHALLENGE_VERDICTS:
            raise DomainError(VALIDATION_ERROR, "decision is approve, edit or respond.", fields=["decision"])
        if verdict == "edit":
            full = decidable_by(request.user).get(pk=target.pk)
            edits = _parse_edits(request, full.current_params(), list(full.classification.get("editable_params", ())))
            decision = services.edit_decision(target.pk, revision, edits)
        elif verdict == "respond":
            decision = services.answer_decision(target.pk, revision, answer_text(request))
        else:
            decision = (str(target.pk), revision, "approve")
        body = challenge(request.user, services.decision_digest([decision]),
                         rp_id=request.get_host().rsplit(":", 1)[0])
    except DomainError as error:
        return JsonResponse({"code": error.code, "message": error.message,
                             **({"details": error.details} if error.details else {})}, status=error.http_status)
    return JsonResponse(body)
