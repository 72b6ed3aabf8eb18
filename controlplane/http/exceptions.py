"""DRF's EXCEPTION_HANDLER: every error an API view raises, in the one shape."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .codes import (
    CSRF_FAILED,
    INVALID_TOKEN,
    MALFORMED_BODY,
    METHOD_NOT_ALLOWED,
    NOT_ACCEPTABLE,
    NOT_AUTHENTICATED,
    NOT_FOUND,
    PERMISSION_DENIED,
    RATE_LIMITED,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    VALIDATION_ERROR,
)
from .errors import CodedError, error_body

__all__ = ["api_exception_handler"]


def _first_code(exc: exceptions.APIException, default: str) -> str:
    codes = exc.get_codes()
    if isinstance(codes, str):
        return codes
    return default


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's EXCEPTION_HANDLER: map every error to the one JSON shape."""
    if isinstance(exc, CodedError):
        return Response(exc.as_dict(), status=exc.http_status)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body(REQUEST_TOO_LARGE, "The request body is too large."), status=413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None  # a bug: handler500 answers it as JSON

    headers: dict[str, str] = {}
    if isinstance(exc, exceptions.ValidationError):
        body = error_body(VALIDATION_ERROR, "The request is not valid; see details.", fields=exc.detail)
        status_code: int = status.HTTP_422_UNPROCESSABLE_ENTITY
    elif isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        code = _first_code(exc, NOT_AUTHENTICATED)
        if code in ("authentication_failed", "not_authenticated"):
            code = NOT_AUTHENTICATED if isinstance(exc, exceptions.NotAuthenticated) else INVALID_TOKEN
        body = error_body(code, str(exc.detail))
        status_code = status.HTTP_401_UNAUTHORIZED
        response = drf_exception_handler(exc, context)  # carries WWW-Authenticate
        if response is not None and "WWW-Authenticate" in response:
            headers["WWW-Authenticate"] = response["WWW-Authenticate"]
        # DRF turns 401 into 403 when no authenticator offers a challenge; keep 401.
    elif isinstance(exc, exceptions.PermissionDenied):
        detail = str(exc.detail)
        code = CSRF_FAILED if detail.startswith("CSRF Failed") else _first_code(exc, PERMISSION_DENIED)
        if code == "permission_denied":
            code = PERMISSION_DENIED
        body = error_body(code, detail)
        status_code = status.HTTP_403_FORBIDDEN
    elif isinstance(exc, exceptions.NotFound):
        body = error_body(NOT_FOUND, "Not found.")
        status_code = status.HTTP_404_NOT_FOUND
    elif isinstance(exc, exceptions.MethodNotAllowed):
        body = error_body(METHOD_NOT_ALLOWED, str(exc.detail))
        status_code = status.HTTP_405_METHOD_NOT_ALLOWED
    elif isinstance(exc, exceptions.Throttled):
        # DRF's Throttled.__init__ sets `wait` (seconds or None); its stubs leave the attribute out.
        wait = int(exc.wait or 1)  # type: ignore[attr-defined]
        body = error_body(RATE_LIMITED, f"Too many requests; retry in {wait} s.", retry_after=wait)
        headers["Retry-After"] = str(wait)
        status_code = status.HTTP_429_TOO_MANY_REQUESTS
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        body = error_body(UNSUPPORTED_MEDIA_TYPE, str(exc.detail))
        status_code = status.HTTP_415_UNSUPPORTED_MEDIA_TYPE
    elif isinstance(exc, exceptions.NotAcceptable):
        body = error_body(NOT_ACCEPTABLE, str(exc.detail))
        status_code = status.HTTP_406_NOT_ACCEPTABLE
    elif isinstance(exc, exceptions.ParseError):
        body = error_body(MALFORMED_BODY, str(exc.detail))
        status_code = status.HTTP_400_BAD_REQUEST
    else:
        body = error_body(_first_code(exc, "error"), str(exc.detail))
        status_code = exc.status_code
    return Response(body, status=status_code, headers=headers)
