"""WebSocket routes.

Browser sockets (reviewers) sit behind the origin check and session auth; agent
sockets send no Origin header and authenticate with their bearer token instead,
so each route carries its own middleware.
"""

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.urls import path

from agents.consumers import AgentConsumer
from approvals.web.consumers import ReviewerConsumer

from .socket_origin import SameOriginValidator


def browser_socket(consumer):
    """Session-authenticated, same-origin only (scheme, host and port: controlplane/socket_origin.py)."""
    return SameOriginValidator(AuthMiddlewareStack(consumer))


# Each app appends its routes: path("ws/reviewer/", browser_socket(ReviewerConsumer.as_asgi())), ...
websocket_urlpatterns: list = [
    path("ws/reviewer/", browser_socket(ReviewerConsumer.as_asgi())),
    # Agents send no Origin header; the bearer token authenticates (agents/consumers.py).
    path("ws/agent/", AgentConsumer.as_asgi()),
]

websocket_application = URLRouter(websocket_urlpatterns)
