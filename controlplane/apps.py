from django.apps import AppConfig


class ControlplaneConfig(AppConfig):
    """The site itself: wiring, signing in, group membership, navigation and commands."""

    name = "controlplane"
    verbose_name = "Control plane"

    def ready(self) -> None:
        # Every change to a group's membership is audited, naming who made it.
        from .accounts import membership

        membership.connect()

        # The admin's login form gets the same throttling as the dashboard's.
        from django.contrib import admin

        from .accounts.signin import ThrottledAdminAuthenticationForm

        admin.site.login_form = ThrottledAdminAuthenticationForm
