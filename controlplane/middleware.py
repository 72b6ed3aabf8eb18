"""Project middleware adapters."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware as SyncWhiteNoiseMiddleware


class WhiteNoiseMiddleware(SyncWhiteNoiseMiddleware):
    """whitenoise's middleware, made async-capable.

    whitenoise 6 declares itself sync-only, so under ASGI Django would run every
    request's inner middleware and view through `async_to_sync` on a thread the
    request holds until it answers: each waiting long-poll (agents/api/resume.py)
    would pin a thread. Here non-static requests pass straight through on the
    event loop; static files are still served by whitenoise, off the loop.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None, settings=settings) -> None:
        super().__init__(get_response, settings)
        self._is_async = iscoroutinefunction(get_response)
        if self._is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self._is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request):
        static_file = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
        return await self.get_response(request)
