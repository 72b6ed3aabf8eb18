"""Every error answer is `{"code": ..., "message": ..., "details"?: ...}`, and every
response under /api/ is JSON.

`CodedError` is what an app raises to refuse with a registered code (the approvals
app's `DomainError` is one). Oversized bodies, CSRF failures, unknown URLs and
server errors come out in the same shape here; DRF's exceptions in `exceptions`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.csrf import csrf_failure as django_csrf_failure

from .codes import CSRF_FAILED, MALFORMED_BODY, NOT_FOUND, PERMISSION_DENIED, REQUEST_TOO_LARGE, SERVER_ERROR
from .codes import get as get_code
from .dual_mode import DualModeMiddleware

__all__ = ["CodedError", "error_body", "is_api_path", "json_error"]

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


class CodedError(Exception):
    """A refusal with a registered code; its status is the code's unless given.

    `message` is for people; `details` are extra JSON fields for clients.
    """

    def __init__(self, code: str, message: str, *, http_status: int | None = None, **details: object) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.http_status = http_status if http_status is not None else get_code(code).status

    def as_dict(self) -> dict[str, object]:
        return error_body(self.code, self.message, **self.details)

    def as_response(self) -> JsonResponse:
        """The refusal as a plain Django response, for views outside DRF."""
        return JsonResponse(self.as_dict(), status=self.http_status)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


def is_api_path(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"code": code, "message": message, **({"details": details} if details else {})}


def json_error(code: str, message: str, **details: Any) -> JsonResponse:
    """The one error shape as a plain Django response, with the code's registered status."""
    return JsonResponse(error_body(code, message, **details), status=get_code(code).status)


# --- Django-level handlers (URLs and failures outside DRF views) -------------------


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON under /api/, Django's page elsewhere."""
    if is_api_path(request):
        return json_error(NOT_FOUND, f"No API endpoint at {request.path}.")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/, Django's page elsewhere."""
    if is_api_path(request):
        return json_error(SERVER_ERROR, "The server failed to handle the request; it was logged.")
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400 (Django raises RequestDataTooBig as a SuspiciousOperation-like 400)."""
    if is_api_path(request):
        if isinstance(exception, RequestDataTooBig):
            return json_error(REQUEST_TOO_LARGE, "The request body is too large.")
        return json_error(MALFORMED_BODY, "The request could not be understood.")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request):
        return json_error(PERMISSION_DENIED, "You may not do that.")
    return defaults.permission_denied(request, exception)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: JSON under /api/, Django's page elsewhere."""
    if is_api_path(request):
        return json_error(CSRF_FAILED, f"CSRF Failed: {reason}")
    return django_csrf_failure(request, reason)


class APIBodyLimitMiddleware(DualModeMiddleware):
    """Refuse oversized bodies under /api/ before anything reads them: JSON 413.

    Django itself raises RequestDataTooBig only when `request.body` is read, and
    DRF reads the stream directly, so the declared length is checked here
    (API_MAX_BODY_BYTES) and the body is never read. Works in sync and async stacks.
    """

    def process(self, request: HttpRequest) -> HttpResponse | None:
        if not is_api_path(request):
            return None
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return json_error(MALFORMED_BODY, "Content-Length is not a number.")
        limit = settings.API_MAX_BODY_BYTES
        if length > limit:
            return json_error(REQUEST_TOO_LARGE, f"The request body is larger than {limit} bytes.", limit=limit)
        return None
