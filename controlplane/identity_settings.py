"""Identity settings (django-allauth, OpenID Connect single sign-on, second factors),
read from the environment; star-imported by controlplane.settings (docs/deploy.md,
"Identity")."""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

from .environment import env_bool, env_list


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# Local accounts only: an admin creates people, nobody signs up, nobody signs in by email.
ACCOUNT_ADAPTER = "controlplane.accounts.adapter.AccountAdapter"
ACCOUNT_LOGIN_METHODS = {"username"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "password1*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_SESSION_REMEMBER = True  # sessions last SESSION_COOKIE_AGE, as before allauth
ACCOUNT_LOGOUT_REDIRECT_URL = "/login/"  # LOGOUT_REDIRECT_URL
# The sign-in throttle above is the brake on password guessing (the adapter skips allauth's
# own, a hard lock that would refuse the right password too); allauth's `login_failed`
# limit still brakes guessing a second-factor code.
ACCOUNT_RATE_LIMITS = {"login": None}
# Every other page that checks a person's password or code goes through the same throttle
# (controlplane/accounts/password_checks.py): the password change's current password, and
# the second-factor code at sign-in and at re-authentication. Re-authentication by
# password goes through the adapter.
ACCOUNT_FORMS = {"change_password": "controlplane.accounts.password_checks.ChangePasswordForm"}
MFA_FORMS = {
    "authenticate": "controlplane.accounts.password_checks.AuthenticateForm",
    "reauthenticate": "controlplane.accounts.password_checks.ReauthenticateForm",
}
SOCIALACCOUNT_ADAPTER = "controlplane.accounts.adapter.SocialAccountAdapter"
# Single sign-on: OpenID Connect providers as JSON, e.g. OIDC_PROVIDERS='[{"id": "corp",
# "name": "Corp SSO", "issuer": "https://idp.example", "client_id": "...", "secret": "..."}]'.
# People signing in through one are created at their first sign-in; at every sign-in their
# groups become exactly those named in the OIDC_GROUPS_CLAIM claim (controlplane.accounts.sso).
OIDC_PROVIDERS: list[dict] = json.loads(os.environ.get("OIDC_PROVIDERS") or "[]")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups")
# Off: only identity providers sign people in (the password form is gone, posted passwords refused).
LOCAL_PASSWORD_LOGIN = env_bool("LOCAL_PASSWORD_LOGIN", True)


def social_providers(providers: list[dict]) -> dict:
    """allauth's SOCIALACCOUNT_PROVIDERS for a list shaped like OIDC_PROVIDERS."""
    return {
        "openid_connect": {
            "OAUTH_PKCE_ENABLED": True,
            "APPS": [
                {
                    "provider_id": provider["id"],
                    "name": provider.get("name", provider["id"]),
                    "client_id": provider["client_id"],
                    "secret": provider.get("secret", ""),
                    "settings": {"server_url": provider["issuer"], "token_auth_method": "client_secret_post"},
                }
                for provider in providers
            ],
        }
    }


SOCIALACCOUNT_PROVIDERS = social_providers(OIDC_PROVIDERS)


SOCIALACCOUNT_EMAIL_AUTHENTICATION = False  # an email claim never links to a local account
# The access (and refresh) token of each sign-in through a provider is kept, so the
# user-info re-check can ask the provider about the person later (controlplane.accounts.recheck).
SOCIALACCOUNT_STORE_TOKENS = True
# Sessions signed in through a provider are re-checked against its user info when their
# last check is this old (the beat task looks every SSO_RECHECK_SWEEP_SECONDS): a person
# it no longer knows is signed out; changed groups apply at once.
SSO_RECHECK_SECONDS = int(os.environ.get("SSO_RECHECK_SECONDS", str(50 * 60)))
# Step-up by the provider: its sign-in must be at most this old (and after the challenge).
PROVIDER_STEP_UP_MAX_AGE_SECONDS = int(os.environ.get("PROVIDER_STEP_UP_MAX_AGE_SECONDS", "120"))
SSO_RECHECK_SWEEP_SECONDS = int(os.environ.get("SSO_RECHECK_SWEEP_SECONDS", str(5 * 60)))
# Passkeys (WebAuthn) need a secure context: https, or http://localhost in development.
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes", "webauthn"]
MFA_TOTP_ISSUER = os.environ.get("MFA_TOTP_ISSUER", "HITL control plane")
# Codes this many 30-second steps early or late are accepted too (drifting clocks).
MFA_TOTP_TOLERANCE = int(os.environ.get("MFA_TOTP_TOLERANCE", "0"))
# Members of these groups must enroll a second factor at their next sign-in. Unset: every
# group that may decide a request needing step-up (controlplane.accounts.mfa_policy);
# empty: nobody; otherwise group names, comma-separated.
MFA_REQUIRED_GROUPS: list[str] | None = env_list("MFA_REQUIRED_GROUPS") if "MFA_REQUIRED_GROUPS" in os.environ else None
# The identity providers' origins: the sign-in form posts there (Content-Security-Policy form-action).
OIDC_ISSUER_ORIGINS = sorted({_origin(provider["issuer"]) for provider in OIDC_PROVIDERS})
