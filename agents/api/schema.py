"""OpenAPI helpers: every endpoint lists each status it can return and the
stable error codes behind each status.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse

from .errors import (
    MALFORMED_BODY,
    METHOD_NOT_ALLOWED,
    NOT_AUTHENTICATED,
    NOT_FOUND,
    PERMISSION_DENIED,
    RATE_LIMITED,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    VALIDATION_ERROR,
)
from .serializers import ErrorSerializer

DEFAULT_CODES: dict[int, list[str]] = {
    400: [MALFORMED_BODY],
    401: [NOT_AUTHENTICATED, "invalid_token", "token_revoked", "token_expired", "agent_inactive"],
    403: [PERMISSION_DENIED, "insufficient_scope"],
    404: [NOT_FOUND],
    405: [METHOD_NOT_ALLOWED],
    409: ["illegal_transition"],
    413: [REQUEST_TOO_LARGE],
    415: [UNSUPPORTED_MEDIA_TYPE],
    422: [VALIDATION_ERROR],
    429: [RATE_LIMITED],
}

STATUS_TEXT = {
    400: "Malformed body",
    401: "Not authenticated",
    403: "Forbidden",
    404: "Not found (also for another agent's request: existence is not leaked)",
    405: "Method not allowed",
    409: "Conflict with the request's state",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Validation failed",
    429: "Rate limited (see Retry-After)",
}


def error_responses(*statuses: int, codes: dict[int, list[str]] | None = None) -> dict[int, OpenApiResponse]:
    """`{status: OpenApiResponse(Error)}` whose descriptions list the possible `code` values."""
    codes = codes or {}
    responses = {}
    for status in statuses:
        listed = sorted(set(codes.get(status, DEFAULT_CODES.get(status, []))))
        responses[status] = OpenApiResponse(
            ErrorSerializer,
            description=f"{STATUS_TEXT.get(status, 'Error')}. `code` is one of: "
            + ", ".join(f"`{c}`" for c in listed),
        )
    return responses


AGENT_ERRORS = (400, 401, 403, 404, 405, 413, 415, 429)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agents.api.auth.BearerTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent API token: cp_<prefix>_<secret>."}


class ReviewerSessionScheme(OpenApiAuthenticationExtension):
    target_class = "agents.api.auth.ReviewerSessionAuthentication"
    name = "reviewerSession"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid",
                "description": "A reviewer's Django session; unsafe methods need the X-CSRFToken header."}
