"""System checks for execution settings: refuse to start with an executor name no
executor is registered under (DESIGN.md: a typo must not hand execution to the agent)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from .executors import unknown_executor_names


@register()
def executors_are_registered(app_configs, **kwargs) -> list[Error]:
    return [
        Error(
            f"settings.EXECUTORS names the executor {name!r}, which is not registered.",
            hint="Register it (approvals.execution.executors.register) or fix the name.",
            id="approvals.E001",
        )
        for name in unknown_executor_names(settings.EXECUTORS)
    ]
