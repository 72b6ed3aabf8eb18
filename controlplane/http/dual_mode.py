"""One base for the site's middlewares that serve sync and async stacks alike.

Django runs a middleware in the mode of the handler below it: declared able to do both
(`sync_capable = async_capable = True`), it is handed a coroutine function when the stack
is async and must then be one itself (`markcoroutinefunction`), or Django wraps it in
`async_to_sync` and every request holds a thread (a waiting long-poll would pin one).
Django's own `MiddlewareMixin` does this by running each hook through `sync_to_async`, a
thread hop per request; these middlewares mostly check a header or a cookie and must not
pay it, so a subclass says which requests block (`blocks`) and only those leave the loop.

A subclass writes its logic once, as sync code:

- `process(request)`: an answer of its own (a refusal, a redirect, a static file), or None
  to pass the request on;
- `around(request)`: a context held while the rest of the stack answers (a ContextVar set
  for the request's duration);

and overrides `aprocess` only where the async spelling must differ.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest
from django.http.response import HttpResponseBase

__all__ = ["DualModeMiddleware"]

GetResponse = Callable[[HttpRequest], Any]


class DualModeMiddleware:
    """A middleware that answers on the event loop under ASGI and plainly under WSGI."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        # asgiref's check: Django marks its async handlers in a way asyncio's misses.
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    # --- What a subclass writes -----------------------------------------------------------------

    def process(self, request: HttpRequest) -> HttpResponseBase | None:
        """An answer instead of the rest of the stack's, or None to pass the request on."""
        return None

    def blocks(self, request: HttpRequest) -> bool:
        """Whether `process` may block on this request (reads the database, a form body, a
        file): under ASGI it then runs in a thread, otherwise on the event loop."""
        return False

    def around(self, request: HttpRequest) -> AbstractContextManager[object]:
        """A context held while the rest of the stack answers the request."""
        return nullcontext()

    async def aprocess(self, request: HttpRequest) -> HttpResponseBase | None:
        """`process` under ASGI: in a thread when it `blocks`, else on the loop."""
        if self.blocks(request):
            return await sync_to_async(self.process)(request)
        return self.process(request)

    # --- Django's entry point -----------------------------------------------------------------------

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        answer = self.process(request)
        if answer is not None:
            return answer
        with self.around(request):
            return self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        answer = await self.aprocess(request)
        if answer is not None:
            return answer
        with self.around(request):
            response: Awaitable[HttpResponseBase] = self.get_response(request)
            return await response
