"""The agents' side of /api/v1/ (DESIGN.md "Agent-facing contract"): submit, cancel,
claim and complete. Reading requests is the approvals app's API; waiting is `resume`.

Views parse, authorize and call services; nothing here changes state by hand.
An agent sees only its own requests: another agent's request is 404, exactly
like one that does not exist.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from approvals import errors as domain_errors
from approvals import services
from approvals.api.representation import request_dict, with_current_params
from approvals.api.serializers import ApprovalRequestSerializer
from approvals.errors import DomainError, no_such_request
from approvals.models import ApprovalRequest
from approvals.resume_schema import SCHEMA_CODES
from approvals.states import Kind
from audit.chain import Actor
from controlplane.http.callers import HasScope, IsAgent
from controlplane.http.codes import VALIDATION_ERROR
from controlplane.http.outbound import OUTBOUND_CODES
from controlplane.http.schema import TOKEN_ERRORS, error_responses

from ..models import Agent, Scope
from ..resume import resume_payload
from ..submissions import IDEMPOTENCY_KEY_REUSED, submit_from_agent
from .auth import AgentPrincipal, BearerTokenAuthentication, TokenRateThrottle
from .serializers import (
    ActionSubmissionSerializer,
    CancelSerializer,
    ClaimSerializer,
    CompleteSerializer,
    GrantSerializer,
    LeaseSerializer,
    PlanSubmissionSerializer,
    RenewSerializer,
    ResumeSerializer,
    SuspensionSubmissionSerializer,
    title_from_markdown,
)


def agent_request_or_404(agent, pk) -> ApprovalRequest:
    """The agent's own request, ready to render; another agent's reads as missing (no existence leak)."""
    found = with_current_params(ApprovalRequest.objects.filter(agent=agent, pk=pk)).first()
    if found is None:
        raise no_such_request()
    return found


class SubmissionResponseSerializer(ApprovalRequestSerializer):
    resume = ResumeSerializer(help_text="Already decided (auto-approved or refused)? The resume data, else undecided.")

    class Meta(ApprovalRequestSerializer.Meta):
        fields = [*ApprovalRequestSerializer.Meta.fields, "resume"]


def _represent(request_obj: ApprovalRequest, *, with_resume: bool = False, params: dict | None = None) -> dict:
    """`params`: the current revision's params when the caller has them (no query)."""
    data = request_dict(request_obj, params=params)
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
    def agent(self) -> Agent:
        principal = self.request.user
        if not isinstance(principal, AgentPrincipal):  # IsAgent admits only a token's principal
            raise TypeError("an agent view served a caller that is not an agent")
        return principal.agent


IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Scoped to the agent. Same key + same body replays the first response (header "
    "`Idempotent-Replayed: true`); same key + different body is 422 `idempotency_key_reused`.",
)
SUBMIT_RESPONSES = {
    201: SubmissionResponseSerializer,
    **error_responses(*TOKEN_ERRORS, domain_errors.INVALID_ACTION_TYPE, IDEMPOTENCY_KEY_REUSED, *OUTBOUND_CODES),
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
            raise DomainError(VALIDATION_ERROR, "Idempotency-Key must be 1 to 200 characters.")
        if key is not None and "\x00" in key:  # PostgreSQL text cannot hold NUL: a 500 otherwise
            raise DomainError(VALIDATION_ERROR, "Idempotency-Key must not contain NUL.")
        if self.kind == Kind.PLAN and not data.get("title"):
            data["title"] = title_from_markdown(data["plan"], fallback=data["path"].rsplit("/", 1)[-1])
        result = submit_from_agent(self.agent, self.kind, data, idempotency_key=key)
        if result.replayed:  # the first request may have moved on since: read it back
            body = _represent(agent_request_or_404(self.agent, result.request.pk), with_resume=True)
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

    @extend_schema(
        operation_id="submit_action",
        summary="Submit an action (tool call)",
        parameters=[IDEMPOTENCY_HEADER],
        request=ActionSubmissionSerializer,
        responses=SUBMIT_RESPONSES,
        tags=["agents"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class PlanSubmitView(_SubmitView):
    """`POST /api/v1/plans/`: submit a Markdown plan (Mastra's submit_plan).

    The same path (and thread, when given) after a rejection is the next
    revision: `supersedes` links the rejected one and carries its feedback.
    """

    serializer_class = PlanSubmissionSerializer
    kind = Kind.PLAN

    @extend_schema(
        operation_id="submit_plan",
        summary="Submit a plan",
        parameters=[IDEMPOTENCY_HEADER],
        request=PlanSubmissionSerializer,
        responses=SUBMIT_RESPONSES,
        tags=["agents"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class SuspensionSubmitView(_SubmitView):
    """`POST /api/v1/suspensions/`: a workflow step paused for a typed answer.

    Reviewers answer with an object the `resume_schema` accepts (validated on the
    server); the resume gives that object back as `resume_data`, exactly as validated.
    """

    serializer_class = SuspensionSubmissionSerializer
    kind = Kind.SUSPENSION

    @extend_schema(
        operation_id="submit_suspension",
        summary="Submit a suspension (a step waiting for an answer)",
        parameters=[IDEMPOTENCY_HEADER],
        request=SuspensionSubmissionSerializer,
        responses={
            201: SubmissionResponseSerializer,
            **error_responses(
                *TOKEN_ERRORS, domain_errors.INVALID_ACTION_TYPE, IDEMPOTENCY_KEY_REUSED, *OUTBOUND_CODES, *SCHEMA_CODES
            ),
        },
        tags=["agents"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class CancelView(AgentView):
    """`POST /api/v1/requests/{id}/cancel/`: withdraw before execution."""

    required_scope = Scope.SUBMIT
    serializer_class = CancelSerializer

    @extend_schema(
        operation_id="cancel_request",
        summary="Withdraw a request before execution",
        request=CancelSerializer,
        responses={
            200: ApprovalRequestSerializer,
            **error_responses(*TOKEN_ERRORS, domain_errors.ILLEGAL_TRANSITION, domain_errors.ALREADY_DECIDED),
        },
        tags=["agents"],
    )
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent_request_or_404(self.agent, pk)
        services.cancel(
            pk, actor=Actor.for_agent(self.agent), agent=self.agent, reason=serializer.validated_data["reason"]
        )
        return Response(_represent(agent_request_or_404(self.agent, pk)))


class ClaimView(AgentView):
    """`POST /api/v1/requests/{id}/claim/`: re-validate and claim the execution; single-use grant."""

    required_scope = Scope.CLAIM
    serializer_class = ClaimSerializer

    @extend_schema(
        operation_id="claim_request",
        summary="Claim an approved execution",
        request=ClaimSerializer,
        responses={
            200: GrantSerializer,
            **error_responses(
                *TOKEN_ERRORS,
                domain_errors.ALREADY_CLAIMED,
                domain_errors.EXECUTED_BY_SERVER,
                domain_errors.ILLEGAL_TRANSITION,
                domain_errors.ATTEMPTS_EXHAUSTED,
                *domain_errors.REVALIDATION_CODES,
            ),
        },
        tags=["agents"],
    )
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent_request_or_404(self.agent, pk)
        grant = services.claim_execution(
            pk,
            actor=Actor.for_agent(self.agent),
            agent=self.agent,
            target_hash=serializer.validated_data.get("target_hash"),
            nonce=serializer.validated_data["nonce"],
        )
        return Response(GrantSerializer(grant).data)


class RenewView(AgentView):
    """`POST /api/v1/requests/{id}/renew/`: extend the claimed execution's lease (long tools)."""

    required_scope = Scope.CLAIM
    serializer_class = RenewSerializer

    @extend_schema(
        operation_id="renew_request",
        summary="Renew an execution's lease",
        request=RenewSerializer,
        responses={
            200: LeaseSerializer,
            **error_responses(
                *TOKEN_ERRORS,
                domain_errors.LEASE_EXPIRED,
                domain_errors.INVALID_GRANT,
                domain_errors.ILLEGAL_TRANSITION,
            ),
        },
        tags=["agents"],
    )
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        agent_request_or_404(self.agent, pk)
        renewed = services.renew_execution(
            pk, token=serializer.validated_data["token"], actor=Actor.for_agent(self.agent)
        )
        return Response(LeaseSerializer({"request_id": renewed.pk, "lease_until": renewed.lease_until}).data)


class CompleteView(AgentView):
    """`POST /api/v1/requests/{id}/complete/`: report the claimed execution's outcome."""

    required_scope = Scope.CLAIM
    serializer_class = CompleteSerializer

    @extend_schema(
        operation_id="complete_request",
        summary="Report an execution's outcome",
        request=CompleteSerializer,
        responses={
            200: ApprovalRequestSerializer,
            **error_responses(
                *TOKEN_ERRORS,
                domain_errors.INVALID_GRANT,
                domain_errors.LEASE_EXPIRED,
                domain_errors.ILLEGAL_TRANSITION,
            ),
        },
        tags=["agents"],
    )
    def post(self, request: Request, pk) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        agent_request_or_404(self.agent, pk)
        services.complete_execution(
            pk,
            token=data["token"],
            succeeded=data["succeeded"],
            actor=Actor.for_agent(self.agent),
            result=data["result"],
            error=data["error"],
        )
        return Response(_represent(agent_request_or_404(self.agent, pk)))
