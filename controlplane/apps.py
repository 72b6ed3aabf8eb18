from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.conf import settings


class ControlplaneConfig(AppConfig):
    """The site itself: wiring, signing in, group membership, navigation and commands."""

    name = "controlplane"
    verbose_name = "Control plane"

    def ready(self) -> None:
        from . import config_checks  # noqa: F401  (registers the unsafe-secrets check)
        from .accounts import sessions  # noqa: F401  (stamps each sign-in for the session limits)

        # The audit app's error codes join the site's registry, and it answers with its statuses.
        _register_audit_codes()

        for folder in local_folders():
            folder.mkdir(parents=True, exist_ok=True)

        # Every change to a group's membership is audited, naming who made it.
        from .accounts import membership

        membership.connect()

        # Sign-ins, sign-outs, failures and second-factor changes are audited.
        from .accounts import events

        events.connect()

        # People signing in through an identity provider get the groups its claim names.
        from .accounts import sso

        sso.connect()
        # ...and the provider can end those sessions (back-channel logout, user-info re-check).
        from .accounts import provider_sessions

        provider_sessions.connect()
        # ...and vouches afresh for each decision made from Slack.
        from .accounts import chat_recheck

        chat_recheck.connect()

        # The admin signs in through the dashboard's login: one throttle, one second factor.
        from allauth.account.decorators import secure_admin_login
        from django.contrib import admin

        # Step-up's passwords and codes meet the sign-in throttle too (the services cannot import it).
        from .accounts import password_checks

        password_checks.install()

        # Instance attributes shadowing AdminSite's methods: allauth's documented way to guard
        # the admin's login. mypy sees only a method being replaced (and, on the logout,
        # compares the bound wrapper with the unbound method's `self`-first signature).
        admin.site.login = secure_admin_login(admin.site.login)  # type: ignore[method-assign]
        admin.site.logout = events.audited_logout(admin.site.logout)  # type: ignore[method-assign, assignment]
        # Django's admin changes one's own password without the current one; allauth's page
        # asks for it, under the throttle (accounts/password_checks.py).
        admin.site.password_change = _allauth_password_change  # type: ignore[method-assign]


def _register_audit_codes() -> None:
    """audit/error_codes.py: the audit app may not import the registry, nor it the audit app."""
    from audit import error_codes as audit_codes

    from .http import codes

    registered = {error.code for error in codes.all_codes()}
    for code, (status, description) in audit_codes.OWN.items():
        if code not in registered:  # Django may call ready() twice
            codes.register(code, status, description)
    audit_codes.use_statuses(lambda code: codes.get(code).status)


def _allauth_password_change(request: Any, extra_context: Any = None) -> Any:
    from django.shortcuts import redirect

    return redirect("account_change_password")


def local_folders() -> list[Path]:
    """The folders this process writes local state into: created at start, never at import."""
    folders = [Path(settings.VAR_DIR), Path(settings.STATIC_ROOT)]
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    for key in ("data_folder_in", "data_folder_out", "control_folder", "processed_folder"):
        if key in options:
            folders.append(Path(options[key]))
    return folders
