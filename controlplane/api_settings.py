"""The API's settings: DRF, the OpenAPI schema, request limits, outbound calls and
agent callbacks; star-imported by controlplane.settings."""

from __future__ import annotations

import os

from .environment import env_bool, env_list

REST_FRAMEWORK = {
    # An agent's bearer token or a person's session (CSRF enforced); each token has its own rate limit.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agents.api.auth.BearerTokenAuthentication",
        "controlplane.http.callers.SessionAuthentication",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["agents.api.auth.TokenRateThrottle"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Every error under /api/ is JSON {code, message, details?} (controlplane/http/errors.py).
    "EXCEPTION_HANDLER": "controlplane.http.exceptions.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's defaults, with a JSON parser that refuses deep nesting as a 400 instead of a 500.
    "DEFAULT_PARSER_CLASSES": [
        "controlplane.http.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}

# --- Agent-facing API (agents/api) ----------------------------------------------

# CSRF failures are JSON under /api/ and Django's page elsewhere.
CSRF_FAILURE_VIEW = "controlplane.http.errors.csrf_failure"
API_MAX_BODY_BYTES = int(os.environ.get("API_MAX_BODY_BYTES", str(1024 * 1024)))
API_MAX_PARAMS_BYTES = int(os.environ.get("API_MAX_PARAMS_BYTES", str(64 * 1024)))
API_MAX_PLAN_CHARS = int(os.environ.get("API_MAX_PLAN_CHARS", str(200_000)))
API_MAX_WAIT_SECONDS = int(os.environ.get("API_MAX_WAIT_SECONDS", "60"))
# (requests, window seconds) per agent token; an atomic counter in the cache.
AGENT_TOKEN_RATE_LIMIT = (int(os.environ.get("AGENT_TOKEN_RATE_LIMIT", "600")), 60)
# Outbound URLs (callbacks, webhook executor, notifications): URL prefixes or host
# patterns (controlplane/http/outbound.py); private/loopback/link-local refused unless
# allowed, all of them or only the networks (CIDR) listed in OUTBOUND_ALLOWED_NETWORKS.
OUTBOUND_URL_ALLOWLIST = env_list("OUTBOUND_URL_ALLOWLIST", "")
OUTBOUND_ALLOW_PRIVATE = env_bool("OUTBOUND_ALLOW_PRIVATE", False)
OUTBOUND_ALLOWED_NETWORKS = env_list("OUTBOUND_ALLOWED_NETWORKS", "")
# Agent callbacks (agents/callbacks.py): attempts and backoff before giving up.
CALLBACK_MAX_ATTEMPTS = int(os.environ.get("CALLBACK_MAX_ATTEMPTS", "8"))
CALLBACK_RETRY_BASE_SECONDS = float(os.environ.get("CALLBACK_RETRY_BASE_SECONDS", "5"))
CALLBACK_RETRY_MAX_SECONDS = float(os.environ.get("CALLBACK_RETRY_MAX_SECONDS", "900"))
CALLBACK_TIMEOUT_SECONDS = float(os.environ.get("CALLBACK_TIMEOUT_SECONDS", "10"))
# Nudge a worker right after each change (the beat sweep delivers regardless).
CALLBACK_PUSH_TASK = env_bool("CALLBACK_PUSH_TASK", True)
# The MCP gateway's upstream servers (agents/mcp_gateway/config.py): a deploy-time JSON or
# TOML file, never the database or the admin (a command there would be code execution).
MCP_UPSTREAMS_FILE = os.environ.get("MCP_UPSTREAMS_FILE", "")
# A held call (agents/mcp_gateway/held.py): how long one tools/call waits for the decision
# (clients time out around 60 s), how long a request that ended without running still
# answers an identical call, and the largest upstream result kept for retries (in the
# cache, until the request's execute_by).
MCP_HOLD_SECONDS = float(os.environ.get("MCP_HOLD_SECONDS", "50"))
MCP_RETRY_WINDOW_SECONDS = int(os.environ.get("MCP_RETRY_WINDOW_SECONDS", "600"))
MCP_RESULT_MAX_BYTES = int(os.environ.get("MCP_RESULT_MAX_BYTES", str(1024 * 1024)))

SPECTACULAR_SETTINGS = {
    "TITLE": "HITL control plane API",
    "DESCRIPTION": "Agents submit actions and plans and wait for people's decisions; reviewers decide. "
    "Every error is JSON with a stable `code` and a human `message`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "StateEnum": "approvals.states.State",
        "RiskLevelEnum": "approvals.states.RiskLevel",
        "KindEnum": "approvals.states.Kind",
    },
}
