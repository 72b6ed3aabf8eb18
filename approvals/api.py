"""Reviewer-facing API: which requests a person may see, and their decisions.

Reviewers use Django sessions with CSRF enforced. Visibility is the guardian
view permission, resolved by `approvals.permissions.viewable_by` (the same
filter as the queue and history pages), never a per-row check.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.response import Response

from agents.api.auth import IsReviewer, ReviewerSessionAuthentication
from agents.api.schema import error_responses
from agents.api.serializers import ApprovalRequestSerializer, DecisionSerializer

from . import errors, services
from .errors import DomainError
from .models import ApprovalRequest
from .permissions import viewable_by

__all__ = ["DecisionView", "viewable_by"]


class DecisionView(generics.GenericAPIView):
    """`POST /api/v1/requests/{id}/decisions/`: approve, approve with edits, or reject.

    Only a reviewer who can view the request learns it exists (others get 404);
    the decide permission and separation of duties are checked by the services
    under the row lock.
    """

    authentication_classes = [ReviewerSessionAuthentication]
    permission_classes = [IsReviewer]
    serializer_class = DecisionSerializer
    throttle_classes: list = []

    @extend_schema(
        operation_id="decide_request",
        summary="Decide a request (reviewers, session + CSRF)",
        request=DecisionSerializer,
        responses={
            200: ApprovalRequestSerializer,
            **error_responses(401, 403, 404, 409, 413, 422, codes={
                403: [errors.NOT_PERMITTED, errors.SEPARATION_OF_DUTIES, "csrf_failed", "permission_denied"],
                409: [errors.ILLEGAL_TRANSITION, errors.ALREADY_DECIDED, errors.ALREADY_VOTED,
                      "decision_deadline_passed"],
                422: ["validation_error", errors.PARAM_NOT_EDITABLE, errors.EDIT_PROHIBITED, "no_changes"],
            }),
        },
        tags=["reviewers"],
    )
    def post(self, request, pk):
        if not viewable_by(request.user).filter(pk=pk).exists():
            raise DomainError("not_found", "No such approval request.", http_status=404)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data["decision"] == "reject":
            decided = services.reject(pk, reviewer=request.user, feedback=data["feedback"])
        elif data.get("edits"):
            decided = services.approve_with_edits(
                pk, reviewer=request.user, edits=data["edits"], feedback=data["feedback"]
            )
        else:
            decided = services.approve(pk, reviewer=request.user, feedback=data["feedback"])
        decided = ApprovalRequest.objects.select_related("agent", "supersedes").get(pk=decided.pk)
        return Response(ApprovalRequestSerializer(decided).data)
