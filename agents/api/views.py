"""The agent-facing REST API under /api/v1/ (DESIGN.md "Agent-facing contract").

Views parse, authorize and call services; nothing here changes state by hand.
An agent sees only its own requests: another agent's request is 404, exactly
like one that does not exist.
"""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, pagination, status
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import errors as domain_errors
from approvals import permissions, services
from approvals.api import viewable_by
from approvals.errors import DomainError
from approvals.models import ApprovalRequest, ParamsRevision
from approvals.states import Kind, State
from audit.chain import Actor

from ..models import Scope
from ..resume import resume_payload
from ..submissions import IDEMPOTENCY_KEY_REUSED, submit_from_agent
from .auth import (
    AgentPrincipal,
    BearerTokenAuthentication,
    HasScope,
    IsAgent,
    IsAgentOrReviewer,
    ReviewerSessionAuthentication,
    TokenRateThrottle,
)
from .schema import AGENT_ERRORS, error_responses
from .serializers import (
    ActionSubmissionSerializer,
    ApprovalRequestSerializer,
    CancelSerializer,
    ClaimSerializer,
    CompleteSerializer,
    GrantSerializer,
    PlanSubmissionSerializer,
    ResumeSerializer,
    represent,
    title_from_markdown,
)

FILTERS = ("state", "kind", "action_type", "run_id", "thread_id", "resource_id", "tool_call_id", "idempotency_key")


def request_queryset() -> QuerySet[ApprovalRequest]:
    """Requests with what the serializer reads, in a constant number of queries."""
    return ApprovalRequest.objects.select_related("agent", "supersedes").prefetch_related(
        Prefetch("revisions", queryset=ParamsRevision.objects.only("request_id", "number", "params"))
    )


def agent_request_or_404(agent, pk) -> ApprovalRequest:
    """The agent's own request; another agent's reads as missing (no existence leak)."""
    found = request_queryset().filter(agent=agent, pk=pk).first()
    if found is None:
        raise DomainError("not_found", "No such approval request.", http_status=404)
    return found


class SubmissionResponseSerializer(ApprovalRequestSerializer):
    resume = ResumeSerializer(help_text="Already decided (auto-approved or refused)? The resume data, else undecided.")

    class Meta(ApprovalRequestSerializer.Meta):
        fields = [*ApprovalRequestSerializer.Meta.fields, "resume"]


def _represent(request_obj: ApprovalRequest, *, with_resume: bool = False, params: dict | None = None) -> dict:
    """`params`: the current revision's params when the caller has them (no query)."""
    data = represent(request_obj) if params is None else represent(request_obj, params=params)
    if with_resume:
        data["resume"] = resume_payload(request_obj, params=data["params"])
    return data


class AgentView(generics.GenericAPIView):
    """Base: bearer token, the scope the view names, the per-token rate limit."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [IsAgent, HasScope]
    throttle_classes = [TokenRateThrottle]
    required_scope: str | dict[str, str] = Scope.READ

    @property
    def agent(self):
        return self.request.user.agent


IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="Scoped to the agent. Same key + same body replays the first response (header "
    "`Idempotent-Replayed: true`); same key + different body is 422 `idempotency_key_reused`.",
)
SUBMIT_RESPONSES = {
    201: SubmissionResponseSerializer,
    **error_responses(*AGENT_ERRORS, 409, 422, codes={
        409: ["illegal_transition"],
        422: ["validation_error", IDEMPOTENCY_KEY_REUSED, "outbound_url_invalid", "outbound_url_not_allowed",
              "outbound_url_private", "outbound_url_unresolvable"],
    }),
}


class _SubmitView(AgentView):
    required_scope = Scope.SUBMIT
    kind: str = Kind.ACTION

    def post(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        key = request.headers.get("Idempotency-Key") or data.pop("idempotency_key", None)
        data.pop("idempotency_key", None)
        if key is not None and not (0 < len(key) <= 200):
            raise DomainError("validation_error", "Idempotency-Key must be 1 to 200 characters.", http_status=422)
        if key is not None and "\x00" in key:  # PostgreSQL text cannot hold NUL: a 500 otherwise
            raise DomainError("validation_error", "Idempotency-Key must not contain NUL.", http_status=422)
        if self.kind == Kind.PLAN and not data.get("title"):
            data["title"] = title_from_markdown(data["plan"], fallback=data["path"].rsplit("/", 1)[-1])
        result = submit_from_agent(self.agent, self.kind, data, idempotency_key=key)
        if result.replayed:  # the first request may have moved on since: read it back
            body = _represent(request_queryset().get(pk=result.request.pk), with_resume=True)
        else:  # answered from what submit just wrote, as it committed it
            body = _represent(result.request, with_resume=True, params=result.params)
        headers = {"Location": f"/api/v1/requests/{result.request.pk}/"}
        if result.replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(body, status=status.HTTP_201_CREATED, headers=headers)


class ActionSubmitView(_SubmitView):
    """`POST /api/v1/actions/`: submit a tool call for approval."""

    serializer_class = ActionSubmissionSerializer
    kind = Kind.ACTION

    @extend_schema(operation_id="submit_action", summary="Submit an action (tool call)",
                   parameters=[IDEMPOTENCY_HEADER], request=ActionSubmissionSerializer,
                   responses=SUBMIT_RESPONSES, tags=["agents"])
    def post(self, request: Request) -> Response:
        return super().post(request)


class PlanSubmitView(_SubmitView):
    """`POST /api/v1/plans/`: submit a Markdown plan (Mastra's submit_plan).

    The same path (and thread, when given) after a rejection is the next
    revision: `supersedes` links the rejected one and carries its feedback.
    """

    serializer_class = PlanSubmissionSerializer
    kind = Kind.PLAN

    @extend_schema(operation_id="submit_plan", summary="Submit a plan", parameters=[IDEMPOTENCY_HEADER],
                   request=PlanSubmissionSerializer, responses=SUBMIT_RESPONSES, tags=["agents"])
    def post(self, request: Request) -> Response:
        return super().post(request)


class RequestCursorPagination(pagination.CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class RequestListView(generics.ListAPIView):
    """`GET /api/v1/requests/`: an agent's own requests, or the ones a reviewer may view.

    A restarted agent finds its request with `?idempotency_key=` or
    `?run_id=...&tool_call_id=...`.
    """

    authentication_classes = [BearerTokenAuthentication, ReviewerSessionAuthentication]
    permission_classes = [IsAgentOrReviewer, HasScope]
    throttle_classes = [TokenRateThrottle]
    required_scope = Scope.READ
    serializer_class = ApprovalRequestSerializer
    pagination_class = RequestCursorPagination

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        user = self.request.user
        if isinstance(user, AgentPrincipal):
            queryset = request_queryset().filter(agent=user.agent)
        else:
            # Filtered in place (not `pk__in` of a second queryset) so PostgreSQL can walk
            # the created_at index with the permission probe and stop at the page.
            queryset = permissions.viewable_by(user, request_queryset())
        params = self.request.query_params
        for name in FILTERS:
            value = params.get(name)
            if value and "\x00" in value:
                # No stored value holds NUL (PostgreSQL text cannot), and the query would fail with a 500.
                return queryset.none()
            if value:
                queryset = queryset.filter(**{name: value})
        return queryset

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), "mask": not isinstance(self.request.user, AgentPrincipal)}

    @extend_schema(
        operation_id="list_requests", summary="List requests (agent: own; reviewer: permitted)",
        parameters=[
            OpenApiParameter(name, str, required=False,
                             enum=[c for c, _ in (State.choices if name == "state" else Kind.choices)]
                             if name in ("state", "kind") else None)
            for name in FILTERS
        ],
        responses={200: ApprovalRequestSerializer(many=True), **error_responses(401, 403, 404, 429)},
        tags=["agents", "reviewers"],
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RequestDetailView(generics.GenericAPIView):
    """`GET /api/v1/requests/{id}/`."""

    authentication_classes = [BearerTokenAuthentication, ReviewerSessionAuthentication]
    permission_classes = [IsAgentOrReviewer, HasScope]
    throttle_classes = [TokenRateThrottle]
    required_scope = Scope.READ
    serializer_class = ApprovalRequestSerializer

    @extend_schema(operation_id="get_request", summary="One request",
                   responses={200: ApprovalRequestSerializer, **error_responses(401, 403, 404, 429)},
                   tags=["agents", "reviewers"])
    def get(self, request: Request, pk) -> Response:
        user = request.user
        if isinstance(user, AgentPrincipal):
            found = agent_request_or_404(user.agent, pk)
        else:
            found = request_queryset().filter(pk__in=viewable_by(user).values("pk"), pk=pk).first()
            if found is None:
                raise DomainError("not_found", "No such approval request.", http_status=404)
        return Response(ApprovalRequestSerializer(found, context={"mask": not isinstance(user, AgentPrincipal)}).data)


class CancelView(AgentView):
    """`POST /api/v1/requests/{id}/cancel/`: withdraw before execution."""

    required_scope = Scope.SUBMIT
    serializer_class = CancelSerializer

    @extend_schema(operation_id="cancel_request", summary="Withdraw a request before execution",
                   request=CancelSerializer,
                   responses={200: ApprovalRequestSerializer, **error_responses(*AGENT_ERRORS, 409, 422, codes={
                       409: [domain_errors.ILLEGAL_TRANSITION, domain_errors.ALREADY_DECIDED]})},
                   tags=["agents"])
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent_request_or_404(self.agent, pk)
        services.cancel(pk, actor=Actor.for_agent(self.agent), agent=self.agent,
                        reason=serializer.validated_data["reason"])
        return Response(_represent(request_queryset().get(pk=pk)))


class ClaimView(AgentView):
    """`POST /api/v1/requests/{id}/claim/`: re-validate and claim the execution; single-use grant."""

    required_scope = Scope.CLAIM
    serializer_class = ClaimSerializer

    @extend_schema(
        operation_id="claim_request", summary="Claim an approved execution", request=ClaimSerializer,
        responses={200: GrantSerializer, **error_responses(*AGENT_ERRORS, 409, 422, codes={
            409: ["already_claimed", domain_errors.EXECUTED_BY_SERVER, domain_errors.ILLEGAL_TRANSITION,
                  *domain_errors.REVALIDATION_CODES],
        })},
        tags=["agents"],
    )
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent_request_or_404(self.agent, pk)
        grant = services.claim_execution(
            pk, actor=Actor.for_agent(self.agent), agent=self.agent,
            target_hash=serializer.validated_data.get("target_hash"),
        )
        return Response(GrantSerializer(grant).data)


class CompleteView(AgentView):
    """`POST /api/v1/requests/{id}/complete/`: report the claimed execution's outcome."""

    required_scope = Scope.CLAIM
    serializer_class = CompleteSerializer

    @extend_schema(
        operation_id="complete_request", summary="Report an execution's outcome", request=CompleteSerializer,
        responses={200: ApprovalRequestSerializer, **error_responses(*AGENT_ERRORS, 409, 422, codes={
            403: ["permission_denied", "insufficient_scope", domain_errors.INVALID_GRANT],
            409: [domain_errors.ILLEGAL_TRANSITION],
        })},
        tags=["agents"],
    )
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        agent_request_or_404(self.agent, pk)
        services.complete_execution(
            pk, token=data["token"], succeeded=data["succeeded"], actor=Actor.for_agent(self.agent),
            result=data["result"], error=data["error"],
        )
        return Response(_represent(request_queryset().get(pk=pk)))
