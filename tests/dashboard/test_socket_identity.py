"""The reviewer socket follows the person and checks the full Origin: deactivation
closes it at once, a lost close message is caught by the periodic re-check, and
an Origin on another port (or scheme) of the same host is refused."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from controlplane.routing import websocket_application
from tests.dashboard.test_consumer import TIMEOUT, headers, session_cookie
from tests.sockets import open_socket, refused_socket

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = {"type": "websocket.close", "code": 4001}


def _socket(cookie: str, *, origin: str = "http://testserver", host: str | None = None):
    sent = headers(cookie=cookie, origin=origin) + ([(b"host", host.encode())] if host else [])
    return open_socket(websocket_application, "/ws/reviewer/", headers=sent)


def _closed_after(cookie: str, change) -> dict:
    async def scenario() -> dict:
        async with _socket(cookie) as socket:
            await database_sync_to_async(change)()
            return await socket.receive_output(timeout=TIMEOUT)

    return async_to_sync(scenario)()


def test_deactivating_a_reviewer_closes_their_socket(people):
    alice = people["alice"]

    def deactivate() -> None:
        alice.is_active = False
        alice.save()

    assert _closed_after(session_cookie(alice), deactivate) == CLOSED


@pytest.mark.parametrize("lost_change", ["deactivated", "left_group", "session_deleted", "password_changed"])
def test_a_lost_close_message_is_caught_by_the_recheck(people, reviewers_group, settings, lost_change):
    settings.SOCKET_RECHECK_SECONDS = 0.1
    bob = people["bob"]
    User = get_user_model()

    def change() -> None:  # each without the signal that would send the close message
        if lost_change == "deactivated":
            User.objects.filter(pk=bob.pk).update(is_active=False)
        elif lost_change == "left_group":
            User.groups.through.objects.filter(user_id=bob.pk).delete()
        elif lost_change == "session_deleted":
            Session.objects.all().delete()
        else:
            bob.set_password("a-new-pw-456!")
            User.objects.filter(pk=bob.pk).update(password=bob.password)

    assert _closed_after(session_cookie(bob), change) == CLOSED


def test_an_unchanged_reviewer_stays_connected_across_rechecks(people, settings):
    settings.SOCKET_RECHECK_SECONDS = 0.05
    cookie = session_cookie(people["carol"])

    async def scenario() -> dict:
        async with _socket(cookie) as socket:
            # Several re-checks pass; the socket still answers.
            assert await socket.receive_nothing(timeout=0.3)
            await socket.send_json_to({"type": "ping"})
            return await socket.receive_json_from(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == {"event": "pong"}


@pytest.mark.parametrize(
    "origin, host",
    [
        ("http://localhost:9999", "localhost:8000"),  # same host, another port
        ("https://localhost:8000", "localhost:8000"),  # same host and port, another scheme
        ("http://localhost", "localhost:8000"),
        ("http://evil.example:8000", "evil.example:8000"),  # not an allowed host
        ("http://testserver:8080", None),  # no Host header: an allowed host on its default port only
        ("null", "localhost:8000"),
    ],
)
def test_an_origin_that_is_not_the_servers_own_is_refused(people, origin, host):
    cookie = session_cookie(people["alice"])
    sent = headers(cookie=cookie, origin=origin) + ([(b"host", host.encode())] if host else [])
    assert async_to_sync(refused_socket)(websocket_application, "/ws/reviewer/", headers=sent)


@pytest.mark.parametrize(
    "origin, host",
    [
        ("http://localhost:8000", "localhost:8000"),
        ("http://127.0.0.1:8000", "127.0.0.1:8000"),
        ("https://review.example.com", "internal:8000"),  # CSRF_TRUSTED_ORIGINS
    ],
)
def test_the_servers_own_origin_and_trusted_origins_are_accepted(people, settings, origin, host):
    settings.CSRF_TRUSTED_ORIGINS = ["https://review.example.com"]
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "internal"]
    cookie = session_cookie(people["alice"])

    async def scenario() -> dict:
        async with _socket(cookie, origin=origin, host=host) as socket:
            await socket.send_json_to({"type": "ping"})
            return await socket.receive_json_from(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == {"event": "pong"}
