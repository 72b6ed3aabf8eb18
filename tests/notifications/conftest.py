"""A real SMTP server (aiosmtpd) and a real HTTP receiver on free loopback ports,
the approval tests' cast with email addresses, and an on-call escalation group."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from approvals.notifications import dispatch
from approvals.people import Person


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd handler hook
        self.messages.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp_server(settings) -> Iterator[_Inbox]:
    """An SMTP server on a free port; Django's SMTP backend sends to it."""
    inbox = _Inbox()
    # aiosmtpd's start() connects to the port it was given, so it needs a real one.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST = "127.0.0.1"
        settings.EMAIL_PORT = port
        settings.EMAIL_USE_TLS = False
        settings.EMAIL_TIMEOUT = 5
        yield inbox
    finally:
        controller.stop()


class Receiver:
    """Records webhook POSTs; answers with the next status in `statuses` (then 200)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.calls: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.calls.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/chat"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def payloads(self) -> list[dict]:
        return [json.loads(body) for _, body in self.calls]


@pytest.fixture
def webhook_receiver(settings) -> Iterator[Receiver]:
    settings.OUTBOUND_URL_ALLOWLIST = ["127.0.0.1"]
    settings.OUTBOUND_ALLOW_PRIVATE = True  # tests allow loopback, as DESIGN.md says
    receiver = Receiver()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


@pytest.fixture
def mailed_people(people):
    for name, user in people.items():
        user.email = f"{name}@example.com"
        user.save(update_fields=["email"])
    return people


@pytest.fixture
def oncall(db) -> Group:
    """The second line: erin is on call."""
    group = Group.objects.create(name="oncall")
    erin = get_user_model().objects.create_user("erin", email="erin@example.com", password="erin-pw-123!")
    erin.groups.add(group)
    return group


@pytest.fixture
def email_rule_settings(admin_user):
    """Notification settings on the seeded send_email_default rule (body is masked)."""

    def _configure(**values):
        return dispatch.save_settings("send_email_default", actor=Person(admin_user), **values)

    return _configure
