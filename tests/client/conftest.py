"""The client meets a real daphne server; reviewers decide from another thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection

from approvals.models import ApprovalRequest
from approvals.states import State


@pytest.fixture
def reviewer_decides():
    """Start a thread that waits for the agent's next pending request and decides it with `decide(request)`."""
    threads: list[threading.Thread] = []

    def start(decide: Callable[[ApprovalRequest], object], *, after: float = 0.3) -> None:
        def run() -> None:
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    pending = ApprovalRequest.objects.filter(state=State.PENDING_APPROVAL).order_by("created_at").first()
                    if pending is not None:
                        time.sleep(after)  # let the agent reach its wait
                        decide(pending)
                        return
                    time.sleep(0.05)
            finally:
                connection.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    for thread in threads:
        thread.join(timeout=25)


class DroppingProxy:
    """A TCP proxy to the server that can cut every open connection, or swallow one response."""

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
        self._lock = threading.Lock()
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
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

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
