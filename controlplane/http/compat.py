"""Every place the project reads a library's internals, and why.

Each reach is here and nowhere else, names the library version it was written
against (pinned in requirements.txt), the measurement that justifies it, and has
a canary in tests/test_compat.py that fails loudly when an upgrade moves the
internal. Anything public belongs in the modules that use it, not here. It lives
in the HTTP plumbing (which imports no app) because an app needs it: the agents'
long-poll (agents/api/resume.py) releases its thread here.
"""

from __future__ import annotations

from asgiref.sync import AsyncToSync, SyncToAsync

__all__ = ["has_parked_sync_caller", "leave_request_bodies_to_django", "release_request_thread"]


# --- asgiref 3.13.0: the long-poll's threads ----------------------------------------------
#
# Django's ASGI handler runs each request in a `ThreadSensitiveContext`, and its first
# thread-sensitive call (the `request_started` signal's sync receivers) starts a
# thread for that request, kept until the response is sent. A long-poll waits up to
# a minute, so 500 waiting agents would hold 500 idle threads. asgiref has no public
# way to end a context's thread early. Measured need: tests/api/test_longpoll_load.py
# (200 polls waiting within 16 threads) and tests/perf/bench_longpoll.py (500 polls:
# 11 threads; one per poll without this).


def release_request_thread() -> None:
    """Let the idle thread of the current request's thread-sensitive context exit now.

    Thread-sensitive work later in the request gets a fresh thread. Does nothing
    outside a context, or in one whose executor its creator owns.
    """
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None or context._executor is not None:
        return
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    if executor is not None:
        executor.shutdown(wait=False)


def has_parked_sync_caller() -> bool:
    """Whether a sync thread above this coroutine is parked in `async_to_sync` waiting
    for it (Django's test client, a sync-only middleware).

    That thread owns the database connection (in tests, the transaction) the
    request's data is in, so the long-poll's reads must run on it; under daphne
    there is none, and they run in the loop's shared pool instead of a per-request
    thread. asgiref routes thread-sensitive calls to this thread but does not say
    whether there is one. Measured need: as `release_request_thread`.
    """
    return getattr(AsyncToSync.executors, "current", None) is not None


# --- daphne 4.2.3 on Twisted 26.10.0: request bodies -------------------------------------
#
# Twisted parses every multipart/urlencoded POST into `request.args`, which daphne
# never reads, and answers a body its parser rejects (an empty multipart message,
# a non-ASCII field name) with a bare, non-JSON 400 that never reaches Django
# (twisted#9739, daphne#447). Twisted's public `parsePOSTFormSubmission=False` turns
# that off, but daphne builds its requests itself: its `HTTPFactory.buildProtocol`
# looks the module global `WebRequest` up per connection, so that global is replaced.
# Measured need: tests/hostile/test_stateful.py (a malformed multipart body gets the
# API's JSON 422 under daphne, not Twisted's bare 400).


def leave_request_bodies_to_django() -> None:
    """Under daphne, stop Twisted parsing form bodies before the app sees them."""
    import inspect

    try:
        from daphne import http_protocol
        from twisted.web import http
    except ImportError:  # served by something else
        return
    if getattr(http_protocol.WebRequest, "leaves_bodies_to_django", False):
        return
    if "parsePOSTFormSubmission" not in inspect.signature(http.Request.__init__).parameters:
        return  # an older Twisted: it keeps parsing, as before

    class RawBodyRequest(http_protocol.WebRequest):
        leaves_bodies_to_django = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    http_protocol.WebRequest = RawBodyRequest
