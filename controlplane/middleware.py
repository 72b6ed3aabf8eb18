"""Project middleware adapters."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware as SyncWhiteNoiseMiddleware

from controlplane.http.dual_mode import DualModeMiddleware, GetResponse


class WhiteNoiseMiddleware(DualModeMiddleware, SyncWhiteNoiseMiddleware):
    """whitenoise's middleware, made async-capable.

    whitenoise 6 declares itself sync-only, so under ASGI Django would run every
    request's inner middleware and view through `async_to_sync` on a thread the
    request holds until it answers: each waiting long-poll (agents/api/long_poll.py)
    would pin a thread. Here non-static requests pass straight through on the
    event loop; static files are still served by whitenoise, off the loop.
    """

    def __init__(self, get_response: GetResponse, settings=settings) -> None:
        SyncWhiteNoiseMiddleware.__init__(self, get_response, settings)  # reads the WHITENOISE_* settings
        DualModeMiddleware.__init__(self, get_response)

    def _static_file(self, request: HttpRequest):
        return self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)

    def process(self, request: HttpRequest) -> HttpResponseBase | None:
        static_file = self._static_file(request)
        return None if static_file is None else self.serve(static_file, request)

    async def aprocess(self, request: HttpRequest) -> HttpResponseBase | None:
        # Serving opens the file: off the loop, on any thread (it touches no database).
        static_file = self._static_file(request)
        if static_file is None:
            return None
        return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
