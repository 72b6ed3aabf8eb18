"""`POST /api/v1/step-up/challenges/`: the challenge a passkey signs to confirm decisions.

The answer's challenge is derived from the person, a fresh nonce and the decisions
named: (request, revision, verdict) and, for an edit or an answer, the digest of the
`edits` or `resume_data` sent with it (`services.passkeys`), so the assertion made over
it confirms exactly those decisions, once: a proof for one edit is no proof for another.
Send it with the decision(s) as `step_up: {"method": "passkey", "nonce": ..., "assertion": ...}`.

For someone who signs in only through an identity provider the answer is a nonce and a
`redirect`: the sign-in there that address leads to proves the nonce for those
decisions (`services.provider_step_up`); send `step_up: {"method": "provider", "nonce": ...}`.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from controlplane.http.schema import error_responses

from .. import decide, errors, services
from ..errors import DomainError
from ..services import decision_digest, method_for, passkeys, provider_step_up
from ..services.edits import APPROVE_WITH_EDITS
from ..services.step_up import PROVIDER
from ..services.suspensions import RESPOND
from .serializers import StepUpChallengeResultSerializer, StepUpChallengeSerializer
from .views import PersonView

__all__ = ["StepUpChallengeView", "challenge"]


class StepUpChallengeView(PersonView):
    serializer_class = StepUpChallengeSerializer

    @extend_schema(
        operation_id="step_up_challenge",
        summary="A passkey (or identity provider) challenge for these decisions (reviewers, session + CSRF)",
        request=StepUpChallengeSerializer,
        responses={
            200: StepUpChallengeResultSerializer,
            **error_responses(errors.NO_PASSKEY, errors.REVISION_REQUIRED),
        },
        tags=["reviewers"],
    )
    def post(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        for item in data["requests"]:
            services.require_revision_given(item.get("revision"))
        return Response(challenge(request.user, decision_digest(_decisions(data)), rp_id=self.rp_id()))


def _decisions(data: dict) -> list[tuple]:
    """What the proof will confirm, exactly as the decision services will ask for it."""
    verdict = data["decision"]
    if verdict == APPROVE_WITH_EDITS:
        (item,) = data["requests"]
        return [decide.Decision(str(item["id"]), decide.EDIT, item["revision"], edits=data["edits"]).confirmed()]
    if verdict == RESPOND:
        (item,) = data["requests"]
        return [
            decide.Decision(
                str(item["id"]), decide.RESPOND, item["revision"], resume_data=data["resume_data"]
            ).confirmed()
        ]
    return decide.Batch(verdict, tuple((str(item["id"]), item["revision"]) for item in data["requests"])).confirmed()


def challenge(user, digest: str, *, rp_id: str) -> dict:
    """The challenge for the decisions whose `decision_digest` is `digest`: a passkey's
    `navigator.credentials.get()` options, or for someone who signs in only through an
    identity provider a nonce and the `redirect` that proves it (the dashboard's own
    challenge, approvals.web.views.step_up_challenge, answers the same)."""
    if method_for(user) == PROVIDER:
        nonce = provider_step_up.issue_challenge(user, digest)
        return {
            "method": PROVIDER,
            "nonce": nonce,
            "expires_in": provider_step_up.CHALLENGE_SECONDS,
            "redirect": reverse("provider-step-up", args=[nonce]),
        }
    if not passkeys.has_passkey(user):
        raise DomainError(errors.NO_PASSKEY, "You have no passkey: confirm with your code or password instead.")
    return {"method": "passkey", **passkeys.issue_challenge(user, digest, rp_id=rp_id)}
