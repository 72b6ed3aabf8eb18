"""Requests as agents and people read them, and people's decisions, under /api/v1/.

An agent (token) reads only its own requests; a person (session + CSRF) reads the
ones they may view (guardian's view permission, the same filter as the queue and
history pages). Another's request is 404, exactly like a missing one. Every guard
on a decision is the services' (`approvals.services`); these views only translate.
"""

from __future__ import annotations

from dataclasses import replace

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.http.callers import HasScope, IsAgentOrPerson, IsPerson, SessionAuthentication, is_agent
from controlplane.http.codes import VALIDATION_ERROR
from controlplane.http.pagination import NewestFirstCursorPagination
from controlplane.http.schema import TOKEN_ERRORS, error_responses

from .. import decide, errors, services
from ..errors import DomainError, no_such_request
from ..filters import ApprovalRequestFilterSet
from ..models import ApprovalRequest
from ..permissions import with_view_grant, with_view_grant_or_audit
from ..resume_schema import INVALID_RESUME_DATA, INVALID_RESUME_SCHEMA
from .representation import request_dict, with_current_params
from .serializers import (
    ApprovalRequestSerializer,
    BatchDecisionSerializer,
    BatchDecisionsSerializer,
    DecisionResultSerializer,
    DecisionSerializer,
    RevealedSerializer,
    RevealSerializer,
)

__all__ = [
    "BatchDecisionView",
    "DecisionView",
    "RequestDetailView",
    "RequestListView",
    "RevealView",
    "readable_requests",
]

READ_SCOPE = "read"
READ_ERRORS = (*TOKEN_ERRORS, errors.NOT_FOUND)


def readable_requests(user) -> QuerySet[ApprovalRequest]:
    """What `user` (an agent's principal or a person) may read, ready to render."""
    if is_agent(user):
        return with_current_params(ApprovalRequest.objects.filter(agent=user.agent))
    # Filtered in place (not `pk__in` of a second queryset) so PostgreSQL can walk
    # the created_at index with the permission probe and stop at the page.
    return with_view_grant(user, with_current_params(ApprovalRequest.objects.all()))


class ReaderView(generics.GenericAPIView):
    """Agents (token, `read` scope, the token's rate limit) and people (session) alike;
    authentication and throttling are the project's defaults (settings.REST_FRAMEWORK)."""

    permission_classes = [IsAgentOrPerson, HasScope]
    required_scope = READ_SCOPE

    def render(self, request_obj: ApprovalRequest) -> dict:
        return request_dict(request_obj, mask=not is_agent(self.request.user))


class RequestListView(ReaderView, generics.ListAPIView):
    """`GET /api/v1/requests/`: an agent's own requests, or the ones a person may view.

    A restarted agent finds its request with `?idempotency_key=` or
    `?run_id=...&tool_call_id=...`. The filters are the reviewer pages'
    (`approvals.filters`); an invalid value is a 422 `validation_error` naming it.
    """

    pagination_class = NewestFirstCursorPagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = ApprovalRequestFilterSet

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        return readable_requests(self.request.user)

    def list(self, request: Request, *args, **kwargs) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        if page is None:  # only without a pagination_class, and this view sets one
            raise TypeError("RequestListView must be paginated")
        return self.get_paginated_response([self.render(found) for found in page])

    @extend_schema(
        operation_id="list_requests",
        summary="List requests (agent: own; person: permitted)",
        responses={200: ApprovalRequestSerializer(many=True), **error_responses(*READ_ERRORS, VALIDATION_ERROR)},
        tags=["agents", "reviewers"],
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RequestDetailView(ReaderView):
    """`GET /api/v1/requests/{id}/`."""

    @extend_schema(
        operation_id="get_request",
        summary="One request",
        responses={200: ApprovalRequestSerializer, **error_responses(*READ_ERRORS)},
        tags=["agents", "reviewers"],
    )
    def get(self, request: Request, pk) -> Response:
        found = readable_requests(request.user).filter(pk=pk).first()
        if found is None:
            raise no_such_request()
        # The ETag names the revision (what a decision's If-Match is compared with), not the bytes.
        return Response(self.render(found), headers={"ETag": etag(found.current_revision)})


class PersonView(generics.GenericAPIView):
    """A person's call: session + CSRF, and the step-up proof from the body."""

    authentication_classes = [SessionAuthentication]
    permission_classes = [IsPerson]
    throttle_classes: list = []

    def rp_id(self) -> str:
        """The WebAuthn relying party: the host name the browser (or script) called."""
        return decide.rp_id_of(self.request)


DECISION_ERRORS = (
    errors.SESSION_ENDED,
    errors.NOT_PERMITTED,
    errors.SEPARATION_OF_DUTIES,
    errors.STEP_UP_REQUIRED,
    errors.STEP_UP_FAILED,
    errors.STEP_UP_THROTTLED,
    errors.ILLEGAL_TRANSITION,
    errors.ALREADY_DECIDED,
    errors.ALREADY_VOTED,
    errors.DECISION_DEADLINE_PASSED,
    errors.REVISION_CHANGED,
    errors.REVISION_REQUIRED,
    errors.EMERGENCY_STOP,
    errors.PARAM_NOT_EDITABLE,
    errors.EDIT_PROHIBITED,
    errors.NO_CHANGES,
    errors.DECISION_NOT_ALLOWED,
    errors.REPLY_REQUIRED,
    # Suspensions
    INVALID_RESUME_DATA,
    INVALID_RESUME_SCHEMA,
    errors.RESUME_DATA_REQUIRED,
    errors.NOT_A_SUSPENSION,
)


class DecisionView(PersonView):
    """`POST /api/v1/requests/{id}/decisions/`: approve, approve with edits, or reject.

    Only a person who can view the request learns it exists (others get 404). The
    decision names the revision it was made on, as `revision` or as `If-Match` (the
    request's ETag): without one it is 422 `revision_required`, on another 409
    `revision_changed` (DESIGN.md "A decision names what it decides").
    """

    serializer_class = DecisionSerializer

    @extend_schema(
        operation_id="decide_request",
        summary="Decide a request (reviewers, session + CSRF)",
        request=DecisionSerializer,
        responses={200: DecisionResultSerializer, **error_responses(*DECISION_ERRORS)},
        tags=["reviewers"],
    )
    def post(self, request, pk):
        target = with_view_grant(request.user).filter(pk=pk).only("pk", "kind").first()
        if target is None:
            raise no_such_request()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        decision = decide.read_decision(data, target)
        decision = replace(decision, revision=revision_of(request, decision.revision))
        try:
            decided = decide.decide(decision, actor=decide.reviewer(request, decision.step_up), user=request.user)
        except DomainError as error:
            decide.end_session_if(request, error.code)
            raise
        now = with_current_params(ApprovalRequest.objects.filter(pk=decided.request.pk)).get()
        return Response(
            {**request_dict(now, mask=True), "outcome": decided.outcome}, headers={"ETag": etag(now.current_revision)}
        )


class BatchDecisionView(PersonView):
    """`POST /api/v1/decisions/`: approve or reject several requests at once.

    Each request is decided exactly at the revision given, with every guard of a
    single decision; one step-up proof covers the whole batch and nothing else.
    Requests the person may not view are answered like missing ones.
    """

    serializer_class = BatchDecisionSerializer

    @extend_schema(
        operation_id="decide_batch",
        summary="Decide several requests at once (reviewers, session + CSRF)",
        request=BatchDecisionSerializer,
        responses={200: BatchDecisionsSerializer, **error_responses(errors.REVISION_REQUIRED)},
        tags=["reviewers"],
    )
    def post(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        batch = decide.read_batch(serializer.validated_data)
        decided = decide.decide_batch(
            batch,
            actor=decide.reviewer(request, batch.step_up, covers=batch.confirmed()),
            scope=with_view_grant(request.user),
        )
        if decided.ended_the_session:
            decide.end_session_if(request, errors.SESSION_ENDED)
        # Decided and refused ones in the batch's order, then those the person may not view.
        results: list[dict[str, object]] = []
        for result in decided.results:
            if result.decided is not None:  # result.ok
                results.append({"id": result.request_id, "outcome": result.decided.outcome})
            elif result.error is not None:  # neither: result.missing, listed below
                results.append({"id": result.request_id, "code": result.error.code, "message": result.error.message})
        results += [
            {"id": result.request_id, **no_such_request().as_dict()} for result in decided.results if result.missing
        ]
        return Response({"digest": decided.digest, "results": results})


REVEAL_ERRORS = (errors.NOT_FOUND, errors.NOT_PERMITTED, errors.ILLEGAL_TRANSITION, errors.FIELD_NOT_MASKED)


class RevealView(PersonView):
    """`POST /api/v1/requests/{id}/reveal/`: one masked param's value, for a reviewer
    who may decide the request; each reveal is audited (`request.field_revealed`).

    404 for a request the person may not look at, 403 for one they may see but not
    decide, 409 `illegal_transition` once it is decided or expired, 422
    `field_not_masked` for anything but a param the rule masks.
    """

    serializer_class = RevealSerializer

    @extend_schema(
        operation_id="reveal_field",
        summary="Reveal one masked param (reviewers, session + CSRF; audited)",
        request=RevealSerializer,
        responses={200: RevealedSerializer, **error_responses(*REVEAL_ERRORS)},
        tags=["reviewers"],
    )
    def post(self, request, pk):
        if not with_view_grant_or_audit(request.user).filter(pk=pk).exists():
            raise no_such_request()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        revealed = services.reveal_field(
            pk, serializer.validated_data["field"], actor=services.Person.from_request(request)
        )
        return Response({"field": revealed.field, "value": revealed.value, "revision": revealed.revision})


def etag(revision: int) -> str:
    """The request's revision as an entity tag: what a decision sends back in `If-Match`."""
    return f'"{revision}"'


def revision_of(request: Request, given: int | None) -> int | None:
    """The revision a decision names: the body's `revision`, or the `If-Match` header
    (the revision number, quoted or not: `"3"` or `3`). Both given must agree. None
    when neither is (the service answers 422 `revision_required`). `*`, a weak tag or a
    list is no revision: a decision names the one revision it was made on."""
    header = request.headers.get("If-Match")
    if header is None:
        return given
    text = header.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < 1:
        raise DomainError(
            errors.REVISION_REQUIRED, "If-Match names one revision: the number, quoted or not.", fields=["If-Match"]
        )
    if given is not None and given != int(text):
        raise DomainError(
            VALIDATION_ERROR, f"`revision` ({given}) and If-Match ({text}) disagree.", fields=["revision", "If-Match"]
        )
    return int(text)
