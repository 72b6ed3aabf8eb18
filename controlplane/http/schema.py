"""OpenAPI helpers: every endpoint lists each status it can return and the
registered error codes behind each status.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from .codes import (
    AGENT_INACTIVE,
    INSUFFICIENT_SCOPE,
    INVALID_TOKEN,
    MALFORMED_BODY,
    METHOD_NOT_ALLOWED,
    NOT_AUTHENTICATED,
    NOT_FOUND,
    PERMISSION_DENIED,
    RATE_LIMITED,
    REQUEST_TOO_LARGE,
    TOKEN_EXPIRED,
    TOKEN_REVOKED,
    UNSUPPORTED_MEDIA_TYPE,
    VALIDATION_ERROR,
)
from .codes import get as get_code
from .inputs import INVALID_INPUT

__all__ = ["API_ERRORS", "TOKEN_ERRORS", "ErrorSerializer", "error_responses"]

# What any API endpoint may answer whatever it does.
API_ERRORS = (
    MALFORMED_BODY,
    INVALID_INPUT,
    NOT_AUTHENTICATED,
    INVALID_TOKEN,
    PERMISSION_DENIED,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    VALIDATION_ERROR,
)

# What an endpoint agents reach with a token may also answer.
TOKEN_ERRORS = (TOKEN_REVOKED, TOKEN_EXPIRED, AGENT_INACTIVE, INSUFFICIENT_SCOPE, RATE_LIMITED)

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


class ErrorSerializer(serializers.Serializer):
    """The one error shape."""

    code = serializers.CharField(help_text="A registered, stable error code.")
    message = serializers.CharField()
    details = serializers.JSONField(required=False)


def error_responses(*codes: str) -> dict[int, OpenApiResponse]:
    """`{status: OpenApiResponse(Error)}` for registered `codes`, grouped by their status,
    each description listing the codes it may carry."""
    by_status: dict[int, set[str]] = {}
    for code in (*API_ERRORS, *codes):
        by_status.setdefault(get_code(code).status, set()).add(code)
    return {
        status: OpenApiResponse(
            ErrorSerializer,
            description=f"{STATUS_TEXT.get(status, 'Error')}. `code` is one of: "
            + ", ".join(f"`{code}`" for code in sorted(listed)),
        )
        for status, listed in sorted(by_status.items())
    }


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "controlplane.http.callers.SessionAuthentication"
    name = "reviewerSession"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "A person's Django session; unsafe methods need the X-CSRFToken header.",
        }
