"""The client meets a real daphne server; reviewers decide from another thread once
the agent waits (its long-poll has left the client), never after a fixed pause."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import httpx
import pytest
from django.db import connection

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.people import Person

# Only bounds how long a broken test hangs; no assertion depends on how long anything takes.
HANG_GUARD_SECONDS = 20


class LongPolls:
    """The agent's long-polls, noted as its client sends them: a reviewer waits on these."""

    def __init__(self) -> None:
        self._request_ids: list[str] = []
        self._taken = 0
        self._changed = threading.Condition()

    def note(self, request: httpx.Request) -> None:
        """Called by the client's transport for every request it sends."""
        path = request.url.path  # /api/v1/requests/<id>/resume/
        if path.endswith("/resume/") and float(request.url.params.get("wait", "0")) > 0:
            with self._changed:
                self._request_ids.append(path.rstrip("/").split("/")[-2])
                self._changed.notify_all()

    def next(self, *, timeout: float = HANG_GUARD_SECONDS) -> str:
        """The request the agent's next long-poll waits on (blocks until the agent sends it)."""
        with self._changed:
            arrived = self._changed.wait_for(lambda: len(self._request_ids) > self._taken, timeout)
            assert arrived, f"the agent sent no long-poll within {timeout} s"
            self._taken += 1
            return self._request_ids[self._taken - 1]


class NotingTransport(httpx.HTTPTransport):
    """The client's usual transport, telling `long_polls` about each request it sends."""

    def __init__(self, long_polls: LongPolls) -> None:
        super().__init__()
        self.long_polls = long_polls

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.long_polls.note(request)
        return super().handle_request(request)


class AsyncNotingTransport(httpx.AsyncHTTPTransport):
    """`NotingTransport` for AsyncControlPlane."""

    def __init__(self, long_polls: LongPolls) -> None:
        super().__init__()
        self.long_polls = long_polls

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.long_polls.note(request)
        return await super().handle_async_request(request)


@pytest.fixture
def long_polls() -> LongPolls:
    return LongPolls()


@pytest.fixture
def reviewer_decides(long_polls):
    """`reviewer_decides(decide)`: a thread that waits until the agent long-polls on a request,
    then decides it with `decide(request)`. The agent's client must send through
    `NotingTransport(long_polls)` (the `cp` fixture's does)."""
    threads: list[threading.Thread] = []

    def start(decide: Callable[[ApprovalRequest], object]) -> None:
        def run() -> None:
            try:
                decide(ApprovalRequest.objects.get(pk=long_polls.next()))
            finally:
                connection.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    for thread in threads:
        thread.join(timeout=HANG_GUARD_SECONDS + 5)


class DroppingProxy:
    """A TCP proxy to the server that can cut every open connection, or swallow one response.

    `wait_for_requests(b"/resume/", count=n)` blocks until the n-th request whose first
    line holds that fragment has been passed on to the server.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections: list[socket.socket] = []
        self.swallow_responses = 0
        self.accepted = 0
        self.forwarded: list[bytes] = []  # first lines of the requests passed on to the server
        self._lock = threading.Lock()
        self._forwarded_changed = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self.accepted += 1
                self.connections += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, is_response: bool) -> None:
        try:
            while data := source.recv(65536):
                if is_response:
                    with self._lock:
                        swallow = self.swallow_responses > 0
                        if swallow:
                            self.swallow_responses -= 1
                    if swallow:  # the server did the work; the client never hears of it
                        break
                sink.sendall(data)
                if not is_response:
                    self._note_forwarded(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def _note_forwarded(self, data: bytes) -> None:
        first_line = data.split(b"\r\n", 1)[0]
        if first_line.endswith((b" HTTP/1.1", b" HTTP/1.0")):  # the start of a request, not a body
            with self._forwarded_changed:
                self.forwarded.append(first_line)
                self._forwarded_changed.notify_all()

    def wait_for_requests(self, fragment: bytes, *, count: int = 1, timeout: float = HANG_GUARD_SECONDS) -> None:
        def arrived() -> bool:
            return sum(fragment in line for line in self.forwarded) >= count

        with self._forwarded_changed:
            assert self._forwarded_changed.wait_for(arrived, timeout), (
                f"fewer than {count} requests with {fragment!r} reached the server: {self.forwarded}"
            )

    def drop_all(self) -> None:
        with self._lock:
            for sock in self.connections:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.connections.clear()

    def close(self) -> None:
        self.drop_all()
        self.listener.close()


@pytest.fixture
def proxy(daphne_server):
    running = DroppingProxy(daphne_server.port)
    yield running
    running.close()


# Transfers are high risk and one person decides them; the amount is editable.
EDITABLE_TRANSFER = {
    "name": "transfer_one_person",
    "priority": 5,
    "action_type": "transfer_funds",
    "risk_level": "high",
    "required_approvals": 1,
    "editable_params": ["amount"],
    "conditions": [],
}


@pytest.fixture
def transfer_rule(admin_user):
    """One person decides transfers (ada saved the rule)."""
    return policy.save_rule(EDITABLE_TRANSFER, actor=Person(admin_user), note="one-person transfers")
