"""`POST /api/v1/step-up/challenges/`: the challenge a passkey signs to confirm decisions.

The answer's challenge is derived from the person, a fresh nonce and the (request,
revision, verdict) triples named (`services.passkeys`), so the assertion made over it
confirms exactly those decisions, once. Send it with the decision(s) as
`step_up: {"method": "passkey", "nonce": ..., "assertion": ...}`.

For someone who signs in only through an identity provider the answer is a nonce and a
`redirect`: the sign-in there that address leads to proves the nonce for those
decisions (`services.provider_step_up`); send `step_up: {"method": "provider", "nonce": ...}`.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from controlplane.http.schema import error_responses

from .. import errors
from ..errors import DomainError
from ..services import decision_digest, method_for, passkeys, provider_step_up
from ..services.step_up import PROVIDER
from .serializers import StepUpChallengeResultSerializer, StepUpChallengeSerializer
from .views import PersonView

__all__ = ["StepUpChallengeView"]


class StepUpChallengeView(PersonView):
    serializer_class = StepUpChallengeSerializer

    @extend_schema(
        operation_id="step_up_challenge",
        summary="A passkey (or identity provider) challenge for these decisions (reviewers, session + CSRF)",
        request=StepUpChallengeSerializer,
        responses={200: StepUpChallengeResultSerializer, **error_responses(errors.NO_PASSKEY)},
        tags=["reviewers"],
    )
    def post(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        digest = decision_digest((str(item["id"]), item["revision"], data["decision"]) for item in data["requests"])
        if method_for(request.user) == PROVIDER:
            nonce = provider_step_up.issue_challenge(request.user, digest)
            return Response({"method": PROVIDER, "nonce": nonce, "expires_in": provider_step_up.CHALLENGE_SECONDS,
                             "redirect": reverse("provider-step-up", args=[nonce])})
        if not passkeys.has_passkey(request.user):
            raise DomainError(errors.NO_PASSKEY, "You have no passkey: confirm with your code or password instead.")
        return Response({"method": "passkey", **passkeys.issue_challenge(request.user, digest, rp_id=self.rp_id())})
