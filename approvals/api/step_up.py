"""`POST /api/v1/step-up/challenges/`: the challenge a passkey signs to confirm decisions.

The answer's challenge is derived from the person, a fresh nonce and the (request,
revision, verdict) triples named (`services.passkeys`), so the assertion made over it
confirms exactly those decisions, once. Send it with the decision(s) as
`step_up: {"method": "passkey", "nonce": ..., "assertion": ...}`.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from controlplane.http.schema import error_responses

from .. import errors
from ..errors import DomainError
from ..services import decision_digest, passkeys
from .serializers import StepUpChallengeResultSerializer, StepUpChallengeSerializer
from .views import PersonView

__all__ = ["StepUpChallengeView"]


class StepUpChallengeView(PersonView):
    serializer_class = StepUpChallengeSerializer

    @extend_schema(
        operation_id="step_up_challenge",
        summary="A passkey challenge for these decisions (reviewers, session + CSRF)",
        request=StepUpChallengeSerializer,
        responses={200: StepUpChallengeResultSerializer, **error_responses(errors.NO_PASSKEY)},
        tags=["reviewers"],
    )
    def post(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if not passkeys.has_passkey(request.user):
            raise DomainError(errors.NO_PASSKEY, "You have no passkey: confirm with your code or password instead.")
        digest = decision_digest((str(item["id"]), item["revision"], data["decision"]) for item in data["requests"])
        return Response(passkeys.issue_challenge(request.user, digest, rp_id=self.rp_id()))
