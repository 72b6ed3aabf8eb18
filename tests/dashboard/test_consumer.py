"""The reviewer socket, driven with WebsocketCommunicator over the real routing
(origin check + session auth), with changes made through the services."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client

from approvals import policy, services
from approvals.emergency import set_emergency_stop
from controlplane.routing import websocket_application
from approvals.people import Person

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 3


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def socket(*, cookie: str = "", origin: str = "http://testserver") -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode())]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(websocket_application, "/ws/reviewer/", headers=headers)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


def test_an_anonymous_socket_is_refused(people):
    async def scenario():
        communicator = socket()
        connected, _ = await communicator.connect()
        assert not connected
        await communicator.disconnect()

    run(scenario)


def test_a_socket_from_a_foreign_origin_is_refused_even_with_a_session(people):
    cookie = session_cookie(people["alice"])

    async def scenario():
        communicator = socket(cookie=cookie, origin="https://evil.example")
        connected, _ = await communicator.connect()
        assert not connected
        await communicator.disconnect()

    run(scenario)


def test_a_reviewer_hears_created_updated_removed_for_their_groups_only(people, submit, two_person_rule, admin_user):
    finance = Group.objects.create(name="finance")
    policy.save_rule({"name": "wire_finance", "priority": 4, "action_type": "wire_*", "risk_level": "high",
                      "approver_group": "finance"}, actor=Person(admin_user), note="finance approves wires")
    cookie = session_cookie(people["bob"])

    async def scenario():
        communicator = socket(cookie=cookie)
        connected, _ = await communicator.connect()
        assert connected
        try:
            transfer = await database_sync_to_async(submit)("transfer_funds", params={"amount": 5})
            created = await communicator.receive_json_from(timeout=TIMEOUT)
            assert created == {"event": "card.created", "request_id": str(transfer.pk),
                               "state": "pending_approval", "data": {"verb": "request.queued"}}

            await database_sync_to_async(services.approve)(transfer.pk, actor=services.Person(people["alice"]))
            updated = await communicator.receive_json_from(timeout=TIMEOUT)
            assert updated["event"] == "card.updated" and updated["data"] == {"approvals": 1, "required": 2}

            await database_sync_to_async(services.approve)(transfer.pk, actor=services.Person(people["carol"]))
            removed = await communicator.receive_json_from(timeout=TIMEOUT)
            assert removed["event"] == "card.removed" and removed["state"] == "approved"

            # A wire goes to finance, which bob is not in: nothing reaches him.
            await database_sync_to_async(submit)("wire_money", params={"amount": 5})
            assert await communicator.receive_nothing(timeout=0.5)
        finally:
            await communicator.disconnect()
        assert finance.pk  # the group existed throughout

    run(scenario)


def test_leaving_the_group_closes_the_socket(people, reviewers_group):
    cookie = session_cookie(people["alice"])

    async def scenario():
        communicator = socket(cookie=cookie)
        connected, _ = await communicator.connect()
        assert connected
        try:
            await database_sync_to_async(people["alice"].groups.remove)(reviewers_group)
            closed = await communicator.receive_output(timeout=TIMEOUT)
            assert closed == {"type": "websocket.close", "code": 4001}
        finally:
            await communicator.disconnect()

    run(scenario)


def test_removing_members_from_the_group_side_closes_their_sockets(people, reviewers_group):
    cookie = session_cookie(people["bob"])

    async def scenario():
        communicator = socket(cookie=cookie)
        connected, _ = await communicator.connect()
        assert connected
        try:
            await database_sync_to_async(reviewers_group.user_set.clear)()
            closed = await communicator.receive_output(timeout=TIMEOUT)
            assert closed["type"] == "websocket.close"
        finally:
            await communicator.disconnect()

    run(scenario)


def test_logging_out_closes_the_socket(people):
    client = Client()
    client.force_login(people["carol"])
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    async def scenario():
        communicator = socket(cookie=cookie)
        connected, _ = await communicator.connect()
        assert connected
        try:
            await database_sync_to_async(client.post)("/logout/")
            closed = await communicator.receive_output(timeout=TIMEOUT)
            assert closed["type"] == "websocket.close"
        finally:
            await communicator.disconnect()

    run(scenario)


def test_the_emergency_stop_reaches_every_reviewer(people, admin_user):
    cookie = session_cookie(people["alice"])

    async def scenario():
        communicator = socket(cookie=cookie)
        connected, _ = await communicator.connect()
        assert connected
        try:
            await database_sync_to_async(set_emergency_stop)(on=True, actor=Person(admin_user), reason="drill")
            message = await communicator.receive_json_from(timeout=TIMEOUT)
            assert message == {"event": "emergency.changed", "scope": "global", "on": True, "agent": None,
                               "reason": "drill"}
        finally:
            await communicator.disconnect()

    run(scenario)
