"""The reviewer socket, driven with WebsocketCommunicator over the real routing
(origin check + session auth), with changes made through the services."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client

from approvals import policy, services
from approvals.emergency import set_emergency_stop
from approvals.people import Person
from controlplane.routing import websocket_application
from tests.sockets import open_socket, refused_socket

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 3


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def headers(*, cookie: str = "", origin: str = "http://testserver") -> list[tuple[bytes, bytes]]:
    """What a browser sends with its socket: its Origin, and its session cookie if signed in."""
    sent = [(b"origin", origin.encode())]
    if cookie:
        sent.append((b"cookie", cookie.encode()))
    return sent


def reviewer_socket(*, cookie: str):
    """`async with reviewer_socket(cookie=...) as socket`: a reviewer's accepted socket."""
    return open_socket(websocket_application, "/ws/reviewer/", headers=headers(cookie=cookie))


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


def test_an_anonymous_socket_is_refused(people):
    async def scenario():
        await refused_socket(websocket_application, "/ws/reviewer/", headers=headers())

    run(scenario)


def test_a_socket_from_a_foreign_origin_is_refused_even_with_a_session(people):
    cookie = session_cookie(people["alice"])

    async def scenario():
        await refused_socket(
            websocket_application, "/ws/reviewer/", headers=headers(cookie=cookie, origin="https://evil.example")
        )

    run(scenario)


def test_a_reviewer_hears_created_updated_removed_for_their_groups_only(people, submit, two_person_rule, admin_user):
    finance = Group.objects.create(name="finance")
    policy.save_rule(
        {
            "name": "wire_finance",
            "priority": 4,
            "action_type": "wire_*",
            "risk_level": "high",
            "approver_group": "finance",
        },
        actor=Person(admin_user),
        note="finance approves wires",
    )
    cookie = session_cookie(people["bob"])

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            transfer = await database_sync_to_async(submit)("transfer_funds", params={"amount": 5})
            created = await socket.receive_json_from(timeout=TIMEOUT)
            assert created == {
                "event": "card.created",
                "request_id": str(transfer.pk),
                "state": "pending_approval",
                "data": {"verb": "request.queued"},
            }

            await database_sync_to_async(services.approve)(
                transfer.pk, revision=1, actor=services.Person(people["alice"])
            )
            updated = await socket.receive_json_from(timeout=TIMEOUT)
            assert updated["event"] == "card.updated"
            assert updated["data"] == {"verb": "decision.recorded", "approvals": 1, "required": 2}

            await database_sync_to_async(services.approve)(
                transfer.pk, revision=1, actor=services.Person(people["carol"])
            )
            removed = await socket.receive_json_from(timeout=TIMEOUT)
            assert removed["event"] == "card.removed" and removed["state"] == "approved"

            # A wire goes to finance, which bob is not in: nothing reaches him. Pushes
            # arrive in commit order, so the next thing he hears is the transfer
            # submitted after the wire, never the wire.
            await database_sync_to_async(submit)("wire_money", params={"amount": 5})
            after_the_wire = await database_sync_to_async(submit)("transfer_funds", params={"amount": 6})
            heard = await socket.receive_json_from(timeout=TIMEOUT)
            assert heard["event"] == "card.created" and heard["request_id"] == str(after_the_wire.pk)
        assert finance.pk  # the group existed throughout

    run(scenario)


def test_leaving_the_group_closes_the_socket(people, reviewers_group):
    cookie = session_cookie(people["alice"])

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            await database_sync_to_async(people["alice"].groups.remove)(reviewers_group)
            closed = await socket.receive_output(timeout=TIMEOUT)
            assert closed == {"type": "websocket.close", "code": 4001}

    run(scenario)


def test_removing_members_from_the_group_side_closes_their_sockets(people, reviewers_group):
    cookie = session_cookie(people["bob"])

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            await database_sync_to_async(reviewers_group.user_set.clear)()
            closed = await socket.receive_output(timeout=TIMEOUT)
            assert closed["type"] == "websocket.close"

    run(scenario)


def test_logging_out_closes_the_socket(people):
    client = Client()
    client.force_login(people["carol"])
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            await database_sync_to_async(client.post)("/logout/")
            closed = await socket.receive_output(timeout=TIMEOUT)
            assert closed["type"] == "websocket.close"

    run(scenario)


def test_the_emergency_stop_reaches_every_reviewer(people, admin_user):
    cookie = session_cookie(people["alice"])

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            await database_sync_to_async(set_emergency_stop)(on=True, actor=Person(admin_user), reason="drill")
            message = await socket.receive_json_from(timeout=TIMEOUT)
            assert message == {
                "event": "emergency.changed",
                "scope": "global",
                "on": True,
                "agent": None,
                "reason": "drill",
            }

    run(scenario)


def test_a_permission_taken_from_one_request_takes_only_that_card_off_the_screen(people, submit, reviewers_group):
    """Neither a socket close (the reviewer keeps every other card) nor silence (the card
    would sit there until a decision failed)."""
    from approvals.permissions import revoke_decide_except

    cookie = session_cookie(people["bob"])

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            moved = await database_sync_to_async(submit)("transfer_funds", params={"amount": 5})
            kept = await database_sync_to_async(submit)("transfer_funds", params={"amount": 6})
            for _ in (moved, kept):
                assert (await socket.receive_json_from(timeout=TIMEOUT))["event"] == "card.created"

            await database_sync_to_async(revoke_decide_except)(moved, None)
            heard = await socket.receive_json_from(timeout=TIMEOUT)
            assert heard == {
                "event": "card.removed",
                "request_id": str(moved.pk),
                "state": "",
                "data": {"verb": "access.revoked"},
            }
            assert await socket.receive_nothing(timeout=0.3)  # nothing about the card bob still has
        assert kept.pk != moved.pk

    run(scenario)


def test_presence_reaches_only_reviewers_who_may_see_the_request_and_ends_with_the_socket(people, submit, admin_user):
    """alice looks at a transfer: bob (same group) hears it, carol (who may not see it)
    hears nothing, and a look at a request alice may not see is never relayed."""
    finance = Group.objects.create(name="finance")
    people["carol"].groups.remove(Group.objects.get(name="reviewers"))
    people["carol"].groups.add(finance)
    policy.save_rule(
        {
            "name": "wire_finance",
            "priority": 4,
            "action_type": "wire_*",
            "risk_level": "high",
            "approver_group": "finance",
        },
        actor=Person(admin_user),
        note="finance approves wires",
    )
    transfer = submit("transfer_funds", params={"amount": 5})
    wire = submit("wire_money", params={"amount": 5})  # finance's: alice may not see it
    alice, bob, carol = (session_cookie(people[name]) for name in ("alice", "bob", "carol"))

    async def scenario():
        async with reviewer_socket(cookie=bob) as bob_socket, reviewer_socket(cookie=carol) as carol_socket:
            async with reviewer_socket(cookie=alice) as alice_socket:
                await alice_socket.send_json_to({"type": "presence", "request_id": str(wire.pk)})
                await alice_socket.send_json_to({"type": "presence", "request_id": "not-an-id"})
                await alice_socket.send_json_to({"type": "presence", "request_id": str(transfer.pk)})
                heard = await bob_socket.receive_json_from(timeout=TIMEOUT)
                assert heard["event"] == "presence" and heard["request_id"] == str(transfer.pk)
                assert heard["name"] == "alice" and heard["here"] is True
                assert await alice_socket.receive_nothing(timeout=0.3)  # never told of herself
                # bob's page connects later and asks: alice's socket says it again.
                await bob_socket.send_json_to({"type": "presence.sync"})
                again = await bob_socket.receive_json_from(timeout=TIMEOUT)
                assert again["request_id"] == str(transfer.pk) and again["here"] is True
            gone = await bob_socket.receive_json_from(timeout=TIMEOUT)
            assert gone["request_id"] == str(transfer.pk) and gone["here"] is False and gone["key"] == heard["key"]
            assert await carol_socket.receive_nothing(timeout=0.3)  # not in a group that sees the transfer
            assert await bob_socket.receive_nothing(timeout=0.3)  # and the wire was never relayed

    run(scenario)


def test_a_repeated_look_is_a_heartbeat_said_again(people, submit):
    """The page repeats its selection every ~20 s; the other pages forget a look they
    have not heard of for ~45 s (presence.js), so each repeat must reach them again
    (from the groups the socket already knows: no permission read per heartbeat)."""
    email = submit("send_email")
    alice, bob = (session_cookie(people[name]) for name in ("alice", "bob"))

    async def scenario():
        async with reviewer_socket(cookie=bob) as bob_socket, reviewer_socket(cookie=alice) as alice_socket:
            await alice_socket.send_json_to({"type": "presence", "request_id": str(email.pk)})
            first = await bob_socket.receive_json_from(timeout=TIMEOUT)
            assert first["here"] is True
            await alice_socket.send_json_to({"type": "presence", "request_id": str(email.pk)})
            again = await bob_socket.receive_json_from(timeout=TIMEOUT)
            assert again["here"] is True and again["key"] == first["key"] and again["request_id"] == str(email.pk)

    run(scenario)


def test_a_decision_push_says_who_decided(people, submit):
    people["alice"].first_name, people["alice"].last_name = "Alice", "Liddell"
    people["alice"].save(update_fields=["first_name", "last_name"])
    cookie = session_cookie(people["bob"])

    async def scenario():
        async with reviewer_socket(cookie=cookie) as socket:
            email = await database_sync_to_async(submit)("send_email")
            assert (await socket.receive_json_from(timeout=TIMEOUT))["event"] == "card.created"
            await database_sync_to_async(services.reject)(email.pk, revision=1, actor=services.Person(people["alice"]))
            removed = await socket.receive_json_from(timeout=TIMEOUT)
            assert removed["event"] == "card.removed" and removed["state"] == "rejected"
            # The audit label stays the username; people read the full name.
            assert removed["data"]["decided_by"] == "alice"
            assert removed["data"]["decided_by_name"] == "Alice Liddell"

    run(scenario)
