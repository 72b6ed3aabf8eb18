"""Reviewer-facing API: which requests a person may see, and their decisions.

Reviewers use Django sessions with CSRF enforced. Visibility is the guardian
view permission, resolved by `approvals.permissions.viewable_by` (the same
filter as the queue and history pages), never a per-row check.
"""

from __future__ import annotations

from django.contrib.auth import logout
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response

from agents.api.auth import IsReviewer, ReviewerSessionAuthentication
from agents.api.schema import error_responses
from agents.api.serializers import ApprovalRequestSerializer, BatchDecisionSerializer, DecisionSerializer

from . import errors, services
from .errors import DomainError
from .models import ApprovalRequest
from .states import State
from .permissions import viewable_by

__all__ = ["BatchDecisionView", "DecisionView", "viewable_by"]


class DecisionResultSerializer(ApprovalRequestSerializer):
    outcome = serializers.ChoiceField(
        choices=["approved", "rejected", "vote_recorded", "edit_proposed"], read_only=True,
        help_text="What this decision did: decided the request, counted toward its quorum, or left an edit "
                  "as a proposal the deciding group must approve (your approval does not count for it).",
    )

    class Meta(ApprovalRequestSerializer.Meta):
        fields = [*ApprovalRequestSerializer.Meta.fields, "outcome"]


class ReviewerView(generics.GenericAPIView):
    """A reviewer's API call: session + CSRF, and the step-up proof from the body."""

    authentication_classes = [ReviewerSessionAuthentication]
    permission_classes = [IsReviewer]
    throttle_classes: list = []

    def reviewer(self, data: dict, *, covers=None) -> services.Reviewer:
        proof = data.get("step_up")
        return services.Reviewer.from_request(
            self.request, step_up=services.StepUpProof.password(proof["password"], covers=covers) if proof else None
        )


class DecisionView(ReviewerView):
    """`POST /api/v1/requests/{id}/decisions/`: approve, approve with edits, or reject.

    Only a reviewer who can view the request learns it exists (others get 404).
    Every guard (decide permission, separation of duties, deadlines, emergency
    stop, step-up after any re-classification) is checked by the services under
    the row lock; this view only translates.
    """

    serializer_class = DecisionSerializer

    @extend_schema(
        operation_id="decide_request",
        summary="Decide a request (reviewers, session + CSRF)",
        request=DecisionSerializer,
        responses={
            200: DecisionResultSerializer,
            **error_responses(401, 403, 404, 409, 413, 422, codes={
                401: [errors.SESSION_ENDED],
                403: [errors.NOT_PERMITTED, errors.SEPARATION_OF_DUTIES, errors.STEP_UP_REQUIRED,
                      errors.STEP_UP_FAILED, "csrf_failed", "permission_denied"],
                409: [errors.ILLEGAL_TRANSITION, errors.ALREADY_DECIDED, errors.ALREADY_VOTED,
                      errors.DECISION_DEADLINE_PASSED, errors.REVISION_CHANGED, errors.EMERGENCY_STOP],
                422: ["validation_error", errors.PARAM_NOT_EDITABLE, errors.EDIT_PROHIBITED, errors.NO_CHANGES],
            }),
        },
        tags=["reviewers"],
    )
    def post(self, request, pk):
        if not viewable_by(request.user).filter(pk=pk).exists():
            raise DomainError(errors.NOT_FOUND, "No such approval request.", http_status=404)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        actor = self.reviewer(data)
        try:
            decided = _decide(pk, actor, data)
        except DomainError as error:
            if error.code == errors.SESSION_ENDED:
                logout(request._request)  # the service ended the session; the answer clears the cookie
            raise
        decided = ApprovalRequest.objects.select_related("agent", "supersedes").get(pk=decided.pk)
        return Response({**ApprovalRequestSerializer(decided).data, "outcome": _outcome(decided, request.user)})


class BatchResultSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    outcome = serializers.ChoiceField(choices=["approved", "rejected", "vote_recorded"], required=False)
    code = serializers.CharField(required=False, help_text="Why this one was refused (the single decision's codes).")
    message = serializers.CharField(required=False)


class BatchDecisionsSerializer(serializers.Serializer):
    digest = serializers.CharField(help_text="sha256 over the batch's request:revision:decision lines.")
    results = BatchResultSerializer(many=True)


class BatchDecisionView(ReviewerView):
    """`POST /api/v1/decisions/`: approve or reject several requests at once.

    Each request is decided exactly at the revision given, with every guard of a
    single decision; one step-up proof covers the whole batch and nothing else.
    Requests the reviewer may not view are answered like missing ones.
    """

    serializer_class = BatchDecisionSerializer

    @extend_schema(
        operation_id="decide_batch",
        summary="Decide several requests at once (reviewers, session + CSRF)",
        request=BatchDecisionSerializer,
        responses={200: BatchDecisionsSerializer, **error_responses(401, 403, 413, 422)},
        tags=["reviewers"],
    )
    def post(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        verdict = data["decision"]
        items = [(str(item["id"]), item["revision"]) for item in data["requests"]]
        covered = [(request_id, revision, verdict) for request_id, revision in items]
        actor = self.reviewer(data, covers=covered)
        visible = {str(pk) for pk in viewable_by(request.user).filter(pk__in=[i for i, _ in items])
                   .values_list("pk", flat=True)}
        results = []
        for item in services.decide_batch([i for i in items if i[0] in visible], actor=actor, verdict=verdict,
                                          feedback=data["feedback"]):
            if item.error is None:
                results.append({"id": item.request_id, "outcome": _outcome(item.request, request.user)})
            else:
                results.append({"id": item.request_id, "code": item.error.code, "message": item.error.message})
        if any(result.get("code") == errors.SESSION_ENDED for result in results):
            logout(request._request)
        results += [{"id": i, "code": errors.NOT_FOUND, "message": "No such approval request."}
                    for i, _ in items if i not in visible]
        return Response({"digest": services.decision_digest(covered), "results": results})


def _decide(pk, actor: services.Reviewer, data: dict) -> ApprovalRequest:
    if data["decision"] == "reject":
        return services.reject(pk, actor=actor, feedback=data["feedback"], revision=data.get("revision"))
    if data.get("edits"):
        return services.approve_with_edits(pk, actor=actor, edits=data["edits"], feedback=data["feedback"])
    return services.approve(pk, actor=actor, feedback=data["feedback"], revision=data.get("revision"))


def _outcome(decided: ApprovalRequest, user) -> str:
    if decided.state != State.PENDING_APPROVAL:
        return decided.state
    return "edit_proposed" if services.is_proposal(decided, by=user) else "vote_recorded"
