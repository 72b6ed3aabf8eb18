from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class ControlplaneConfig(AppConfig):
    """The site itself: wiring, signing in, group membership, navigation and commands."""

    name = "controlplane"
    verbose_name = "Control plane"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the unsafe-secrets check)
        from .accounts import sessions  # noqa: F401  (stamps each sign-in for the session limits)

        for folder in local_folders():
            folder.mkdir(parents=True, exist_ok=True)

        # Every change to a group's membership is audited, naming who made it.
        from .accounts import membership

        membership.connect()

        # The admin's login form gets the same throttling as the dashboard's.
        from django.contrib import admin

        from .accounts.signin import ThrottledAdminAuthenticationForm

        admin.site.login_form = ThrottledAdminAuthenticationForm


def local_folders() -> list[Path]:
    """The folders this process writes local state into: created at start, never at import."""
    folders = [Path(settings.VAR_DIR), Path(settings.STATIC_ROOT)]
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    for key in ("data_folder_in", "data_folder_out", "control_folder", "processed_folder"):
        if key in options:
            folders.append(Path(options[key]))
    return folders
