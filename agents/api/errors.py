"""Every response under /api/ is JSON with a stable `code` and a human `message`.

DRF's exceptions, domain refusals (`approvals.errors.DomainError`), oversized
bodies, CSRF failures, unknown URLs and server errors all come out in the same
shape: `{"code": ..., "message": ..., "details"?: ...}`.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.csrf import csrf_failure as django_csrf_failure
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from approvals.errors import DomainError

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"

# Stable codes, listed once for the schema and tests.
NOT_AUTHENTICATED = "not_authenticated"
PERMISSION_DENIED = "permission_denied"
CSRF_FAILED = "csrf_failed"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
VALIDATION_ERROR = "validation_error"
MALFORMED_BODY = "malformed_body"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
NOT_ACCEPTABLE = "not_acceptable"
REQUEST_TOO_LARGE = "request_too_large"
RATE_LIMITED = "rate_limited"
SERVER_ERROR = "server_error"


def is_api_path(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"code": code, "message": message, **({"details": details} if details else {})}


def json_error(code: str, message: str, http_status: int, **details: Any) -> JsonResponse:
    return JsonResponse(error_body(code, message, **details), status=http_status)


def _first_code(exc: exceptions.APIException, default: str) -> str:
    codes = exc.get_codes()
    if isinstance(codes, str):
        return codes
    return default


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's EXCEPTION_HANDLER: map every error to the one JSON shape."""
    if isinstance(exc, DomainError):
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
        status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    elif isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        code = _first_code(exc, NOT_AUTHENTICATED)
        if code in ("authentication_failed", "not_authenticated"):
            code = NOT_AUTHENTICATED if isinstance(exc, exceptions.NotAuthenticated) else "invalid_token"
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
        wait = int(exc.wait or 1)
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


# --- Django-level handlers (URLs and failures outside DRF views) -------------------


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON under /api/, Django's page elsewhere."""
    if is_api_path(request):
        return json_error(NOT_FOUND, f"No API endpoint at {request.path}.", 404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/, Django's page elsewhere."""
    if is_api_path(request):
        return json_error(SERVER_ERROR, "The server failed to handle the request; it was logged.", 500)
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400 (Django raises RequestDataTooBig as a SuspiciousOperation-like 400)."""
    if is_api_path(request):
        if isinstance(exception, RequestDataTooBig):
            return json_error(REQUEST_TOO_LARGE, "The request body is too large.", 413)
        return json_error(MALFORMED_BODY, "The request could not be understood.", 400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return json_error(PERMISSION_DENIED, "You may not do that.", 403)
    return defaults.permission_denied(request, exception)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: JSON under /api/, Django's page elsewhere."""
    if is_api_path(request):
        return json_error(CSRF_FAILED, f"CSRF Failed: {reason}", 403)
    return django_csrf_failure(request, reason)


class APIBodyLimitMiddleware:
    """Refuse oversized bodies under /api/ before anything reads them: JSON 413.

    Django itself raises RequestDataTooBig only when `request.body` is read, and
    DRF reads the stream directly, so the declared length is checked here
    (API_MAX_BODY_BYTES) and the body is never read. Works in sync and async stacks.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        # asgiref's check: Django marks its async handlers in a way asyncio's misses.
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        if not is_api_path(request):
            return None
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return json_error(MALFORMED_BODY, "Content-Length is not a number.", 400)
        limit = settings.API_MAX_BODY_BYTES
        if length > limit:
            return json_error(REQUEST_TOO_LARGE, f"The request body is larger than {limit} bytes.", 413, limit=limit)
        return None

    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self.__acall__(request)
        return self._refusal(request) or self.get_response(request)

    async def __acall__(self, request: HttpRequest):
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        return await self.get_response(request)
