"""System checks of the site's own configuration."""

from django.conf import settings
from django.core.checks import Error, register

from . import keys
from .http.outbound_urls import OutboundURLRefused, check_url


@register()
def unsafe_secrets(app_configs, **kwargs) -> list[Error]:
    """controlplane.E010: outside DEBUG, a missing, development or shared secret stops every command."""
    if settings.DEBUG:
        return []
    return [
        Error(problem, hint="Set it to a random value (docs/deploy.md, 'Secrets').", id="controlplane.E010")
        for problem in keys.problems({name: getattr(settings, name, "") for name in keys.CHECKED_SECRETS})
    ]


@register()
def slack_api_url_allowed(app_configs, **kwargs) -> list[Error]:
    """controlplane.E011: with Slack on, its Web API base must be on the outbound allow-list
    (checked without resolving here; every client built checks the addresses too)."""
    if not settings.SLACK_BOT_TOKEN:
        return []
    try:
        check_url(settings.SLACK_API_URL, resolve=False)
    except OutboundURLRefused as refused:
        hint = "Add its host (slack.com) to OUTBOUND_URL_ALLOWLIST (docs/slack.md)."
        return [Error(f"SLACK_API_URL: {refused.message}", hint=hint, id="controlplane.E011")]
    return []
