"""The agent model as the approvals app sees it: through a setting, like the user model.

Every request belongs to an agent, yet approvals sits below the agents app
(DESIGN.md "Layout": agents -> approvals -> audit). As django.contrib.auth does for
users, the relation names a setting, `APPROVALS_AGENT_MODEL` ("agents.Agent"):
approvals' foreign keys and migrations name the setting, its code gets the class
from `get_agent_model()` and types an agent as `Agent` (what approvals reads of
one), and nothing here imports the agents app. tests/architecture holds the models
and migrations to that.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

__all__ = ["Agent", "get_agent_model"]


class Agent(Protocol):
    """What approvals reads of an agent: its id, its name, whether it is active, its owner.

    The owner is accountable for the agent, so separation of duties keeps them from
    approving its requests (`owner_id`).
    """

    pk: Any
    name: str
    is_active: bool
    owner_id: Any


def get_agent_model() -> type[models.Model]:
    """The model `APPROVALS_AGENT_MODEL` names (as `get_user_model()` does for users)."""
    label = settings.APPROVALS_AGENT_MODEL
    try:
        return apps.get_model(label, require_ready=False)
    except ValueError as exc:
        raise ImproperlyConfigured("APPROVALS_AGENT_MODEL must be of the form 'app_label.model_name'") from exc
    except LookupError as exc:
        raise ImproperlyConfigured(f"APPROVALS_AGENT_MODEL refers to model {label!r}, which is not installed") from exc
