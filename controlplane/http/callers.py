"""Who is calling, told apart without knowing the apps behind them.

An agent's token authenticates (in the agents app) as a principal with
`is_agent = True`, an `agent` and `has_scope(scope)`; a person authenticates with
a Django session. Views and permissions here only look at those attributes, so
this module imports no app.
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, permissions

from .codes import INSUFFICIENT_SCOPE

__all__ = ["HasScope", "IsAgent", "IsAgentOrPerson", "IsPerson", "SessionAuthentication", "is_agent"]


def is_agent(user: Any) -> bool:
    """Whether the authenticated caller is an agent (a token), not a person."""
    return bool(getattr(user, "is_agent", False))


class SessionAuthentication(authentication.SessionAuthentication):
    """A person's Django session with CSRF enforced; offers a challenge so anonymous gets 401, not 403."""

    def authenticate_header(self, request) -> str:
        return 'Session realm="people"'


class IsAgent(permissions.BasePermission):
    message = "This endpoint is for agents (Authorization: Bearer <token>)."

    def has_permission(self, request, view) -> bool:
        return is_agent(request.user)


class IsPerson(permissions.BasePermission):
    """A signed-in, active person (object permissions decide the rest)."""

    message = "This endpoint is for signed-in people."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and not is_agent(user) and user.is_active)


class IsAgentOrPerson(permissions.BasePermission):
    """Endpoints both sides read (list and detail); querysets differ per side."""

    def has_permission(self, request, view) -> bool:
        return IsAgent().has_permission(request, view) or IsPerson().has_permission(request, view)


class HasScope(permissions.BasePermission):
    """An agent's token carries the scope the view names in `required_scope` (per method if a dict)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not is_agent(user):
            return True  # a person: other permissions decide
        required = getattr(view, "required_scope", None)
        if isinstance(required, dict):
            required = required.get(request.method, required.get("*"))
        if required and not user.has_scope(required):
            self.message = f"The token lacks the '{required}' scope."
            self.code = INSUFFICIENT_SCOPE
            return False
        return True
