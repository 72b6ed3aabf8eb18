"""System checks of the site's own configuration."""

from django.conf import settings
from django.core.checks import Error, register

from . import keys


@register()
def unsafe_secrets(app_configs, **kwargs) -> list[Error]:
    """controlplane.E010: outside DEBUG, a missing, development or shared secret stops every command."""
    if settings.DEBUG:
        return []
    return [
        Error(problem, hint="Set it to a random value (docs/deploy.md, 'Secrets').", id="controlplane.E010")
        for problem in keys.problems({name: getattr(settings, name, "") for name in keys.CHECKED_SECRETS})
    ]
