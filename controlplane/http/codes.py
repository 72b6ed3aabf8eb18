"""The registered error codes: every `code` an answer can carry, with its HTTP status.

Like the audit vocabulary, codes are stable names clients branch on: registered
once (a duplicate raises), never renamed, pinned by a golden test
(tests/http/test_codes.py), listed in the OpenAPI schema and handed to the
browser's scripts from the server (`as_script_data`), so no code is typed twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DuplicateCodeError", "ErrorCode", "all_codes", "as_script_data", "get", "register", "template_context"]

_CODE = re.compile(r"[a-z][a-z0-9_]*\Z")


class DuplicateCodeError(ValueError):
    """A code was registered twice."""


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int
    description: str

    @property
    def constant(self) -> str:
        """The name scripts and Python modules use for it: `step_up_required` -> `STEP_UP_REQUIRED`."""
        return self.code.upper()


_CODES: dict[str, ErrorCode] = {}


def register(code: str, status: int, description: str) -> str:
    """Register `code` answered with HTTP `status`; returns the code, so modules write
    `NOT_PERMITTED = register("not_permitted", 403, "...")`."""
    if not _CODE.match(code):
        raise ValueError(f"error code {code!r} must be lowercase words joined by '_'")
    if not 400 <= status <= 599:
        raise ValueError(f"error code {code!r} needs a 4xx or 5xx status, not {status}")
    if not description.strip():
        raise ValueError(f"error code {code!r} needs a description")
    if code in _CODES:
        raise DuplicateCodeError(f"error code {code!r} is already registered")
    _CODES[code] = ErrorCode(code, status, description)
    return code


def get(code: str) -> ErrorCode:
    """The registered code; KeyError for one nobody registered."""
    return _CODES[code]


def all_codes() -> list[ErrorCode]:
    """Every registered code, in registration order."""
    return list(_CODES.values())


def as_script_data() -> dict[str, str]:
    """`{"STEP_UP_REQUIRED": "step_up_required", ...}` for the page's scripts."""
    return {error.constant: error.code for error in _CODES.values()}


def template_context(request) -> dict[str, dict[str, str]]:
    """Context processor: `error_codes`, which `base.html` hands the scripts as JSON."""
    return {"error_codes": as_script_data()}


# --- The codes any HTTP answer may carry ------------------------------------------------------

NOT_AUTHENTICATED = register("not_authenticated", 401, "No credentials were given.")
INVALID_TOKEN = register("invalid_token", 401, "The bearer token is malformed or unknown.")
TOKEN_REVOKED = register("token_revoked", 401, "The agent's token was revoked.")
TOKEN_EXPIRED = register("token_expired", 401, "The agent's token expired.")
AGENT_INACTIVE = register("agent_inactive", 401, "The agent is deactivated.")
PERMISSION_DENIED = register("permission_denied", 403, "The caller may not do that.")
MFA_ENROLLMENT_REQUIRED = register(
    "mfa_enrollment_required", 403, "The person must enroll a second factor (at /accounts/2fa/) before acting."
)
INSUFFICIENT_SCOPE = register("insufficient_scope", 403, "The agent's token lacks the scope this endpoint needs.")
CSRF_FAILED = register("csrf_failed", 403, "A session's write came without a valid CSRF token.")
NOT_FOUND = register("not_found", 404, "No such thing, or not one the caller may see.")
METHOD_NOT_ALLOWED = register("method_not_allowed", 405, "The endpoint does not take that method.")
NOT_ACCEPTABLE = register("not_acceptable", 406, "The endpoint cannot answer in the requested format.")
REQUEST_TOO_LARGE = register("request_too_large", 413, "The request body is over the size limit.")
UNSUPPORTED_MEDIA_TYPE = register("unsupported_media_type", 415, "The body is not in a format the endpoint reads.")
VALIDATION_ERROR = register("validation_error", 422, "Fields are invalid; `details.fields` names each.")
MALFORMED_BODY = register("malformed_body", 400, "The body could not be parsed.")
RATE_LIMITED = register("rate_limited", 429, "Too many requests; `details.retry_after` says when to retry.")
SERVER_ERROR = register("server_error", 500, "The server failed; the failure was logged.")
# The audit app's own codes are declared in audit/error_codes.py (it may not import this
# module, nor this module it) and registered here at start by `controlplane.apps`.
