"""The site's middlewares share one sync/async base: under ASGI none makes Django adapt it
(which would pin a thread per request), and only the requests they say block leave the loop."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils.module_loading import import_string

from controlplane.http.dual_mode import DualModeMiddleware


class _Recorder(DualModeMiddleware):
    """Refuses `/refused`, says form posts block, and notes where each hook ran."""

    def __init__(self, get_response) -> None:
        super().__init__(get_response)
        self.seen: list[tuple[str, int]] = []

    def blocks(self, request) -> bool:
        return request.method == "POST"

    def process(self, request):
        self.seen.append(("process", threading.get_ident()))
        return HttpResponse("refused", status=400) if request.path == "/refused" else None

    @contextmanager
    def around(self, request):
        self.seen.append(("enter", threading.get_ident()))
        yield
        self.seen.append(("exit", threading.get_ident()))


def test_every_site_middleware_of_ours_is_dual_mode_and_async_under_an_async_stack():
    async def view(request):
        return HttpResponse()

    ours = [import_string(path) for path in settings.MIDDLEWARE if not path.startswith(("django.", "allauth.", "csp."))]
    assert len(ours) == 6
    for middleware in ours:
        assert issubclass(middleware, DualModeMiddleware), middleware
        assert iscoroutinefunction(middleware(view)), middleware
        assert not iscoroutinefunction(middleware(lambda request: HttpResponse())), middleware


def test_sync_mode_answers_early_or_wraps_the_rest_of_the_stack():
    middleware = _Recorder(lambda request: HttpResponse("view"))
    factory = RequestFactory()
    assert middleware(factory.get("/refused")).status_code == 400
    assert [hook for hook, _ in middleware.seen] == ["process"]
    middleware.seen.clear()
    assert middleware(factory.get("/")).content == b"view"
    assert [hook for hook, _ in middleware.seen] == ["process", "enter", "exit"]


def test_async_mode_runs_process_on_the_loop_unless_the_request_blocks():
    async def view(request):
        return HttpResponse("view")

    middleware = _Recorder(view)
    factory = RequestFactory()

    async def main() -> tuple[int, HttpResponse, HttpResponse, HttpResponse]:
        loop_thread = threading.get_ident()
        return (
            loop_thread,
            await middleware(factory.get("/")),
            await middleware(factory.post("/")),
            await middleware(factory.get("/refused")),
        )

    loop_thread, passed, posted, refused = asyncio.run(main())
    assert (passed.content, posted.content, refused.status_code) == (b"view", b"view", 400)
    threads = [(hook, thread == loop_thread) for hook, thread in middleware.seen]
    assert threads == [
        ("process", True),
        ("enter", True),
        ("exit", True),
        ("process", False),  # a POST blocks: off the loop
        ("enter", True),
        ("exit", True),
        ("process", True),
    ]
