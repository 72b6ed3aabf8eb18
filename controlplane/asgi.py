import os

from django.conf import settings
from django.core.asgi import get_asgi_application

from controlplane import keys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()
keys.refuse_unsafe(settings)  # before a single request is served

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)

from agents.mcp_gateway.asgi import with_gateway  # noqa: E402
from approvals.push import serving_pushes  # noqa: E402
from controlplane.http.compat import leave_request_bodies_to_django  # noqa: E402
from controlplane.routing import websocket_application  # noqa: E402

# with_gateway: the MCP gateway at /mcp/ (agents/mcp_gateway), everything else Django.
# serving_pushes: sync views and consumers hand their after-commit pushes to this
# server's event loop instead of waiting for them (approvals/push.py).
application = serving_pushes(
    ProtocolTypeRouter({"http": with_gateway(django_asgi_app), "websocket": websocket_application})
)

leave_request_bodies_to_django()  # daphne: Django, not Twisted, parses form bodies (controlplane/http/compat.py)
