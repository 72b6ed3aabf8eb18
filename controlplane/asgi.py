import os

from django.conf import settings
from django.core.asgi import get_asgi_application

from controlplane import keys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi_app = get_asgi_application()
keys.refuse_unsafe(settings)  # before a single request is served

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)

from controlplane.routing import websocket_application  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": websocket_application})


def _leave_request_bodies_to_django() -> None:
    """Under daphne, stop Twisted parsing form bodies before the app sees them.

    Twisted parses every multipart/urlencoded POST into `request.args`, which daphne
    never reads, and answers a body its parser rejects (an empty multipart message,
    a non-ASCII field name) with a bare, non-JSON 400 that never reaches Django
    (twisted#9739, daphne#447). Django parses the body itself and answers in JSON.
    """
    import inspect

    try:
        from daphne import http_protocol
        from twisted.web import http
    except ImportError:  # served by something else
        return
    if getattr(http_protocol.WebRequest, "leaves_bodies_to_django", False):
        return
    if "parsePOSTFormSubmission" not in inspect.signature(http.Request.__init__).parameters:
        return  # an older Twisted (requirements pin daphne only): it keeps parsing, as before

    class RawBodyRequest(http_protocol.WebRequest):
        leaves_bodies_to_django = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    http_protocol.WebRequest = RawBodyRequest  # HTTPFactory.buildProtocol looks the name up per connection


_leave_request_bodies_to_django()
