"""Settings for the HITL control plane, read from the environment.

With nothing set, the project runs embedded: a SQLite file in WAL mode with
immediate transactions, so `make run` works on a bare machine. Production and CI
set DATABASE_URL (PostgreSQL) and REDIS_URL.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dj_database_url
from csp.constants import NONCE

from .environment import env_bool, env_list

BASE_DIR = Path(__file__).resolve().parent.parent
# Local state (the SQLite file, the filesystem broker, collected static files). Settings
# only name these folders; `controlplane.apps` creates them when the site starts.
VAR_DIR = Path(os.environ.get("CONTROLPLANE_VAR_DIR", BASE_DIR / "var"))

DEBUG = env_bool("DEBUG", False)
# Secrets come from the environment. The defaults are development values: outside
# DEBUG every process refuses to start on them (controlplane/keys.py), and each has
# its own so none falls back to another. `make run` generates local ones.
SECRET_KEY = os.environ.get("SECRET_KEY", "insecure-development-key-set-SECRET_KEY-in-production")
# Digests in audit metadata are keyed so short values cannot be recovered by hashing guesses.
AUDIT_HMAC_KEY = os.environ.get("AUDIT_HMAC_KEY", "insecure-development-audit-digest-key")
# The Ed25519 key that signs every audit event and checkpoint is derived from this
# secret (audit/signing.py); during a rotation the previous one signs the hand-over.
AUDIT_SIGNING_KEY = os.environ.get("AUDIT_SIGNING_KEY", "insecure-development-audit-event-signing-key")
AUDIT_PREVIOUS_SIGNING_KEY = os.environ.get("AUDIT_PREVIOUS_SIGNING_KEY", "")
# Public keys audit_verify trusts besides the server's own (one `ed25519:...` per line),
# deployed outside the database; `manage.py audit_public_key` prints them.
# The origin line (and key name) of the audit log's C2SP checkpoints: the deployment's name.
AUDIT_LOG_ORIGIN = os.environ.get("AUDIT_LOG_ORIGIN", "controlplane.localhost/audit")
AUDIT_PUBLIC_KEYS_FILE = os.environ.get("AUDIT_PUBLIC_KEYS_FILE", "")
# Witnesses that cosign the checkpoints (audit/witnesses.py): their cosignature/v1 vkeys
# (`hitl-witness vkey`), whitespace-separated, and how many must cosign for "witnessed"
# (empty: a majority of them).
AUDIT_WITNESSES: list[str] = os.environ.get("AUDIT_WITNESSES", "").split()
AUDIT_WITNESS_QUORUM: int | None = (
    int(os.environ["AUDIT_WITNESS_QUORUM"]) if os.environ.get("AUDIT_WITNESS_QUORUM") else None
)
# Signed chain-head checkpoints are written here, outside the database (see docs/audit.md).
AUDIT_CHECKPOINT_DIR = Path(os.environ.get("AUDIT_CHECKPOINT_DIR", VAR_DIR / "audit-checkpoints"))
# Params that never reach audit metadata, not even as digests, per action type (JSON),
# e.g. AUDIT_REDACTED_FIELDS='{"send_email": ["body"]}'.
AUDIT_REDACTED_FIELDS: dict[str, list[str]] = json.loads(os.environ.get("AUDIT_REDACTED_FIELDS") or "{}")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
# Origins besides the server's own (scheme, host and port) for CSRF and `ws/reviewer/`.
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # allauth's passkey list page loads it (it answered 500 without)
    "rest_framework",
    "django_filters",  # FilterSets shared by the pages and the API (approvals/filters.py, audit/filters.py)
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets served locally, so /api/docs/ works offline
    "guardian",
    # Signing in: allauth's login (with the throttle of controlplane.accounts.signin), its
    # multi-factor part (TOTP, recovery codes) and its social part (identity providers).
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "channels",
    "audit",
    "agents",
    "approvals",
    "controlplane",  # management commands: runstack, demo_agent
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Oversized bodies under /api/ become a JSON 413 before anything reads them.
    "controlplane.http.errors.APIBodyLimitMiddleware",
    # NUL and lone surrogates in any query-string or form field: a 400 naming the field.
    "controlplane.http.inputs.InputEdgeMiddleware",
    # Static files straight from the app's static dirs (WHITENOISE_USE_FINDERS below).
    # whitenoise, made async-capable so no request pins a thread (controlplane/middleware.py).
    "controlplane.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Idle timeout and absolute lifetime of a signed-in session (controlplane/accounts/sessions.py).
    "controlplane.accounts.sessions.SessionLifetimeMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # People who must use a second factor and signed in without one are held at enrollment.
    "controlplane.accounts.mfa_policy.EnrollmentRequiredMiddleware",
    # Remembers the request, so group membership changes name who is signed in.
    "controlplane.accounts.membership.MembershipActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "csp.context_processors.nonce",
                "controlplane.navigation.site_shell",
                "controlplane.http.codes.template_context",
            ],
            # The reviewer pages' template tags live with the pages (approvals/web/).
            "libraries": {
                "dashboard": "approvals.web.templatetags.dashboard",
                "rules_text": "approvals.web.templatetags.rules_text",
            },
            # `ago` ("just now", "3 minutes ago") on every page without a load tag.
            "builtins": ["approvals.web.templatetags.timewords"],
        },
    },
]

# --- Database -------------------------------------------------------------

SQLITE_PATH = VAR_DIR / "controlplane.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{SQLITE_PATH}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        # IMMEDIATE takes the write lock when a transaction starts, so two writers
        # queue instead of failing with "database is locked" on upgrade.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DB_POOL", True):
    # Django runs every sync request in its own thread, so a burst of requests would
    # open a connection each until PostgreSQL refuses more ("too many clients") and
    # requests fail. A bounded pool makes the burst wait for a connection instead.
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool owns connection lifetime
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": int(os.environ.get("DB_POOL_MIN_SIZE", "2")),
        "max_size": int(os.environ.get("DB_POOL_MAX_SIZE", "20")),
        "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "30")),
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth and object permissions -------------------------------------------

# The model of the agents requests belong to, named as AUTH_USER_MODEL names the user
# model: approvals sits below agents (DESIGN.md "Layout"), so its foreign keys and
# migrations name this setting, never the agents app, and its code gets the class from
# approvals.agents.get_agent_model(). Set it before the first migrate, never after.
APPROVALS_AGENT_MODEL = "agents.Agent"

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None  # guardian: anonymous users never hold object permissions
GUARDIAN_RAISE_403 = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
# Sign-in throttling (controlplane.accounts.signin), never a hard lock: an account's first
# LOGIN_FREE_FAILURES failures within LOGIN_FAILURE_WINDOW_SECONDS are free; each
# further one makes the (account, client address) pair it came from wait, starting at
# LOGIN_DELAY_BASE_SECONDS and doubling with the account's failures up to
# LOGIN_DELAY_MAX_SECONDS. Other addresses sign in meanwhile.
LOGIN_FREE_FAILURES = int(os.environ.get("LOGIN_FREE_FAILURES", "5"))
LOGIN_FAILURE_WINDOW_SECONDS = int(os.environ.get("LOGIN_FAILURE_WINDOW_SECONDS", str(60 * 60)))
LOGIN_DELAY_BASE_SECONDS = int(os.environ.get("LOGIN_DELAY_BASE_SECONDS", "1"))
LOGIN_DELAY_MAX_SECONDS = int(os.environ.get("LOGIN_DELAY_MAX_SECONDS", str(15 * 60)))

# --- Identity (django-allauth; docs/deploy.md "Identity") ----------------------------------
from .identity_settings import *  # noqa: E402,F403  (allauth, single sign-on, second factors)

# --- Real-time and tasks ----------------------------------------------------

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # Every waiting long-poll holds one Redis connection in a blocking read;
                # redis-py's default cap of 100 would fail the 101st waiter outright.
                "hosts": [
                    {"address": REDIS_URL, "max_connections": int(os.environ.get("REDIS_MAX_CONNECTIONS", "2000"))}
                ],
            },
        }
    }
else:
    # Embedded: in-memory inside the web process; the worker, beat and commands
    # relay their group sends to it over loopback (controlplane/channel_relay.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "controlplane.channel_relay.RelayChannelLayer"}}
# Where non-web processes send channel-layer messages in the embedded default
# (`manage.py runstack` sets it; otherwise read from VAR_DIR/channel-relay.url).
CHANNEL_RELAY_URL = os.environ.get("CHANNEL_RELAY_URL", "")
# Every open socket re-checks its principal (token, user) this often and closes when
# it was revoked or deactivated: the close message sent at once can be dropped.
SOCKET_RECHECK_SECONDS = float(os.environ.get("SOCKET_RECHECK_SECONDS", "30"))

# Celery: Redis when REDIS_URL is set, else kombu's filesystem transport (no server;
# shared by the worker, beat and web processes of one machine through VAR_DIR/broker).
# The embedded broker names a host (kombu ignores it) so that kombu does not warn "No
# hostname was supplied" in every process on every connection of `make run`.
EMBEDDED_BROKER_URL = "filesystem://localhost/"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL or EMBEDDED_BROKER_URL
BROKER_DIR = Path(os.environ.get("CELERY_BROKER_DIR", VAR_DIR / "broker"))
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        # Taken messages are renamed into this folder: an atomic claim on one filesystem.
        "store_processed": True,
        "processed_folder": str(BROKER_DIR / "processed"),
        "polling_interval": 0.5,
    }
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# --- Execution engine (approvals.execution.executors) ------------------------------------

# Action type (glob) -> server-side executor; unmapped types are executed by the agent.
EXECUTORS: dict[str, str] = json.loads(os.environ.get("EXECUTORS") or "null") or {
    "send_email": "email",
    "notify_webhook": "webhook",
    "demo_*": "noop",
}
EXECUTION_MAX_ATTEMPTS = int(os.environ.get("EXECUTION_MAX_ATTEMPTS", "5"))
EXECUTION_RETRY_BASE_SECONDS = float(os.environ.get("EXECUTION_RETRY_BASE_SECONDS", "10"))
EXECUTION_RETRY_MAX_SECONDS = float(os.environ.get("EXECUTION_RETRY_MAX_SECONDS", "600"))
EXECUTION_SWEEP_SECONDS = float(os.environ.get("EXECUTION_SWEEP_SECONDS", "10"))
# An approved request not published this long after approval is published by the sweeper;
# one published this long ago and still approved is published again (a lost message).
EXECUTION_ENQUEUE_GRACE_SECONDS = float(os.environ.get("EXECUTION_ENQUEUE_GRACE_SECONDS", "15"))
EXECUTION_REPUBLISH_SECONDS = float(os.environ.get("EXECUTION_REPUBLISH_SECONDS", "120"))
EXECUTOR_WEBHOOK_SECRET = os.environ.get("EXECUTOR_WEBHOOK_SECRET", "insecure-development-executor-webhook-secret")
EXECUTOR_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("EXECUTOR_WEBHOOK_TIMEOUT_SECONDS", "10"))
# Only when the receivers dedupe on Idempotency-Key: then a lost webhook execution is re-sent.
WEBHOOK_EXECUTOR_IDEMPOTENT = env_bool("WEBHOOK_EXECUTOR_IDEMPOTENT", False)
EXECUTOR_EMAIL_DOMAIN = os.environ.get("EXECUTOR_EMAIL_DOMAIN", "controlplane.invalid")
# Embedded default: sent mail lands as files in VAR_DIR/sent-mail; production sets SMTP.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = str(VAR_DIR / "sent-mail")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "controlplane@localhost")

# --- Notifications (approvals/notifications) ---------------------------------------
# Links in emails and webhook payloads point here.
SITE_URL = os.environ.get("SITE_URL", "http://localhost:8000")
# Slack (docs/slack.md): unset, the Slack endpoints refuse every request and nothing is sent.
SLACK_BOT_TOKEN = os.environ.get("SLACK_BOT_TOKEN", "")
SLACK_SIGNING_SECRET = os.environ.get("SLACK_SIGNING_SECRET", "")
SLACK_TEAM_ID = os.environ.get("SLACK_TEAM_ID", "")  # set: users of other workspaces are refused
SLACK_API_URL = os.environ.get("SLACK_API_URL", "https://slack.com/api/")
SLACK_RESPONSE_URL_PREFIX = os.environ.get("SLACK_RESPONSE_URL_PREFIX", "https://hooks.slack.com/")
# Receivers verify X-Controlplane-Signature (HMAC-SHA256 of "timestamp.body") with this.
NOTIFICATION_WEBHOOK_SECRET = os.environ.get("NOTIFICATION_WEBHOOK_SECRET", "")
NOTIFICATION_MAX_ATTEMPTS = int(os.environ.get("NOTIFICATION_MAX_ATTEMPTS", "5"))
NOTIFICATION_SWEEP_SECONDS = int(os.environ.get("NOTIFICATION_SWEEP_SECONDS", "60"))
NOTIFICATION_RETRY_BASE_SECONDS = int(os.environ.get("NOTIFICATION_RETRY_BASE_SECONDS", "30"))
NOTIFICATION_WEBHOOK_TIMEOUT = float(os.environ.get("NOTIFICATION_WEBHOOK_TIMEOUT", "5"))

# --- Policy -----------------------------------------------------------------

# The global emergency stop's floor: on here, nothing auto-approves, is claimed or
# executes, whatever the run-time switches say (approvals/emergency.py).
EMERGENCY_STOP = env_bool("EMERGENCY_STOP", False)
# Policy default when no rule matches; never "low", so an unknown tool waits for people.
DEFAULT_RISK_LEVEL = "medium"
DEFAULT_APPROVER_GROUP = "reviewers"
DEFAULT_DECISION_TTL_SECONDS = 3600
DEFAULT_EXECUTION_WINDOW_SECONDS = 900
EXECUTION_LEASE_SECONDS = int(os.environ.get("EXECUTION_LEASE_SECONDS", "300"))
# Step-up (approvals.services.step_up): deciding a request at these levels, or under
# a rule that asks for it, needs a proof made for that decision (DESIGN.md "Guards").
STEP_UP_RISK_LEVELS = env_list("STEP_UP_RISK_LEVELS", "critical")
# This many failed step-ups in a row end the reviewer's session (audited).
STEP_UP_FAILURE_LIMIT = int(os.environ.get("STEP_UP_FAILURE_LIMIT", "3"))
# Four eyes on policy: a change that is not provably stricter waits for a second
# risk-admin's approval (approvals.policy). Off only for a one-person demo.
POLICY_FOUR_EYES = env_bool("POLICY_FOUR_EYES", True)
# Deadlines a change may shorten at once (approvals.policy.authority): not below this many
# seconds, and for at most this many rules per risk-admin per hour; beyond, it waits too.
POLICY_MIN_IMMEDIATE_DEADLINE_SECONDS = int(os.environ.get("POLICY_MIN_IMMEDIATE_DEADLINE_SECONDS", "300"))
POLICY_MAX_SHORTENED_RULES_PER_HOUR = int(os.environ.get("POLICY_MAX_SHORTENED_RULES_PER_HOUR", "3"))

# --- Misc -------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"  # created at start: whitenoise warns about a missing root
# whitenoise serves from the finders, so `make run`, tests and the daphne test server
# need no collectstatic step; a deployment that runs collectstatic may turn it off.
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", True)
WHITENOISE_AUTOREFRESH = DEBUG

# --- Content-Security-Policy (django-csp 4) ------------------------------------
# No inline script or style without the per-response nonce ({{ CSP_NONCE }}).
# connect-src 'self' covers same-origin ws:/wss: (CSP Level 3) for the live sockets.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", NONCE],
        "style-src": ["'self'", NONCE],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        # The sign-in page's provider buttons post here and are redirected to the provider.
        "form-action": ["'self'", *OIDC_ISSUER_ORIGINS],  # noqa: F405 (identity_settings)
        "frame-ancestors": ["'none'"],
    }
}

# --- Cache (sign-in throttling counters) ----------------------------------------
# Redis when configured, so every web process shares the counters; the embedded
# default runs one daphne process, where process memory is enough.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SAMESITE = "Lax"
# Reverse proxies (addresses or networks, comma-separated) whose X-Forwarded-For is
# believed; the client address for sign-in throttling is read through them only.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
SESSION_IDLE_TIMEOUT_SECONDS = int(os.environ.get("SESSION_IDLE_TIMEOUT_SECONDS", str(30 * 60)))
SESSION_MAX_AGE_SECONDS = int(os.environ.get("SESSION_MAX_AGE_SECONDS", str(12 * 60 * 60)))
SESSION_COOKIE_AGE = SESSION_MAX_AGE_SECONDS
# Outside DEBUG cookies travel over HTTPS only (browsers treat http://localhost as
# secure, so `make run` still signs in) and browsers are told to stay on HTTPS.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = 0 if DEBUG else int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 60 * 60)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)

# --- The API (DRF, its schema, limits, outbound calls, callbacks) --------------------------
from .api_settings import *  # noqa: E402,F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
