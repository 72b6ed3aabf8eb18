"""Who changed a group's membership is in the audit chain.

Grace runs the site; bob reviews. Whoever moves people in or out of a group that
approves (grace in the admin, a shell, a command, a job) leaves one
`group.membership_changed` event per group changed, naming them, in the same
transaction as the change.
"""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import Group
from django.db import transaction
from django.forms import CheckboxInput, MultiWidget
from django.test import AsyncClient, Client, RequestFactory

from approvals.permissions import REVIEWERS
from audit.chain import Actor, verify_chain
from audit.models import AuditEvent
from controlplane.accounts.membership import MembershipActorMiddleware, acting_as, current_actor

VERB = "group.membership_changed"


@pytest.fixture
def grace(django_user_model):
    """Grace runs the site: a staff superuser who edits people in the admin."""
    return django_user_model.objects.create_superuser("grace", password="grace-pw-123!")


@pytest.fixture
def grace_in_the_admin(grace) -> Client:
    client = Client()
    client.force_login(grace)
    return client


@pytest.fixture
def events_from_now(people):
    """The membership events recorded after the cast was set up."""
    start = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0

    def events() -> list[AuditEvent]:
        return list(AuditEvent.objects.filter(verb=VERB, seq__gt=start).order_by("seq"))

    return events


def person(user) -> dict:
    return {"id": user.pk, "username": user.username}


def save_groups_in_the_admin(client: Client, user, groups: list[Group]) -> None:
    """Submit the admin's user change form as it stands, with `groups` ticked."""
    url = f"/admin/auth/user/{user.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = _as_submitted(form)
    data["groups"] = [group.pk for group in groups]
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors


def _as_submitted(form) -> dict:
    """What a browser would post back for an unchanged form."""
    data: dict = {}
    for bound in form:
        widget = bound.field.widget
        if bound.field.disabled:
            continue
        value = bound.value()
        if isinstance(widget, MultiWidget):
            for index, (part, subwidget) in enumerate(zip(widget.decompress(value), widget.widgets, strict=True)):
                data[f"{bound.html_name}_{index}"] = subwidget.format_value(part) or ""
        elif isinstance(widget, CheckboxInput):
            if value:
                data[bound.html_name] = "on"
        elif isinstance(value, list | tuple):
            data[bound.html_name] = list(value)
        elif value is not None:
            data[bound.html_name] = value
    return data


# --- Through the admin ---------------------------------------------------------------------------


def test_grace_adding_bob_to_treasury_in_the_admin_names_her_bob_and_treasury(
    people, treasury, grace_in_the_admin, grace, reviewers_group, events_from_now
):
    bob = people["bob"]
    save_groups_in_the_admin(grace_in_the_admin, bob, [reviewers_group, treasury])

    (event,) = events_from_now()
    assert (event.actor_kind, event.actor_id, event.actor_label) == ("user", str(grace.pk), "grace")
    assert event.metadata == {
        "group": "treasury",
        "group_id": treasury.pk,
        "added": [person(bob)],
        "removed": [],
        "via": "admin",
    }
    assert set(bob.groups.all()) == {reviewers_group, treasury}


def test_grace_removing_bob_from_the_reviewers_in_the_admin_is_recorded(
    people, grace_in_the_admin, grace, reviewers_group, events_from_now
):
    bob = people["bob"]
    save_groups_in_the_admin(grace_in_the_admin, bob, [])

    (event,) = events_from_now()
    assert event.actor_label == "grace"
    assert event.metadata["group"] == REVIEWERS and event.metadata["group_id"] == reviewers_group.pk
    assert (event.metadata["added"], event.metadata["removed"]) == ([], [person(bob)])
    assert verify_chain().ok


def test_moving_bob_between_groups_records_one_event_per_group(
    people, treasury, grace_in_the_admin, reviewers_group, events_from_now
):
    save_groups_in_the_admin(grace_in_the_admin, people["bob"], [treasury])

    changed = {event.metadata["group"]: event.metadata for event in events_from_now()}
    assert set(changed) == {REVIEWERS, "treasury"}
    assert changed[REVIEWERS]["removed"] == [person(people["bob"])]
    assert changed["treasury"]["added"] == [person(people["bob"])]


def test_saving_the_form_without_changing_groups_records_nothing(
    people, grace_in_the_admin, reviewers_group, events_from_now
):
    save_groups_in_the_admin(grace_in_the_admin, people["bob"], [reviewers_group])
    assert events_from_now() == []


# --- From code --------------------------------------------------------------------------------------


def test_adding_people_to_a_group_from_code_names_the_process(people, treasury, events_from_now):
    treasury.user_set.add(people["alice"], people["bob"])

    (event,) = events_from_now()
    program, via = current_actor()
    assert (event.actor_kind, event.actor_label, event.metadata["via"]) == ("system", program.label, via)
    assert event.actor_label  # never unattributed
    assert event.metadata["added"] == [person(people["alice"]), person(people["bob"])]


def test_a_shell_session_is_named_as_such(people, treasury, events_from_now, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["manage.py", "shell"])
    people["alice"].groups.add(treasury)

    (event,) = events_from_now()
    assert (event.actor_kind, event.actor_label, event.metadata["via"]) == ("system", "manage.py shell", "shell")


def test_a_management_command_is_named(people, treasury, events_from_now, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/srv/app/manage.py", "--settings=controlplane.settings", "seed_demo"])
    people["alice"].groups.add(treasury)

    (event,) = events_from_now()
    assert (event.actor_label, event.metadata["via"]) == ("manage.py seed_demo", "command")


def test_a_job_acting_for_someone_names_them(people, treasury, grace, events_from_now):
    with acting_as(Actor.for_user(grace), via="api"):
        treasury.user_set.add(people["carol"])
    people["carol"].groups.remove(treasury)  # after the block: the process again

    granted, revoked = events_from_now()
    assert (granted.actor_label, granted.metadata["via"]) == ("grace", "api")
    assert revoked.actor_kind == "system"


def test_adding_a_user_to_two_groups_records_one_event_per_group(people, treasury, events_from_now):
    auditors = Group.objects.get(name="auditors")
    people["mallory"].groups.add(treasury, auditors)

    assert sorted(event.metadata["group"] for event in events_from_now()) == ["auditors", "treasury"]
    assert all(event.metadata["added"] == [person(people["mallory"])] for event in events_from_now())


def test_clearing_a_group_records_everyone_who_was_removed(people, reviewers_group, events_from_now):
    reviewers = sorted((people[name] for name in ("alice", "bob", "carol", "owen", "rita")), key=lambda u: u.pk)
    reviewers_group.user_set.clear()

    (event,) = events_from_now()
    assert event.metadata["group"] == REVIEWERS
    assert event.metadata["removed"] == [person(user) for user in reviewers]
    assert verify_chain().ok


def test_clearing_a_users_groups_records_each_group_left(people, treasury, events_from_now):
    alice = people["alice"]
    alice.groups.add(treasury)
    alice.groups.clear()

    _joined, *left = events_from_now()
    assert sorted(event.metadata["group"] for event in left) == [REVIEWERS, "treasury"]
    assert all(event.metadata["removed"] == [person(alice)] for event in left)


def test_no_change_no_event(people, treasury, reviewers_group, events_from_now):
    people["alice"].groups.add(reviewers_group)  # already a member
    treasury.user_set.remove(people["alice"])  # never a member
    treasury.user_set.clear()  # empty
    people["mallory"].groups.clear()  # in no group
    assert events_from_now() == []


def test_removing_members_and_non_members_together_records_only_the_members(people, reviewers_group, events_from_now):
    reviewers_group.user_set.remove(people["alice"], people["mallory"])
    (event,) = events_from_now()
    assert event.metadata["removed"] == [person(people["alice"])]


def test_a_change_that_rolls_back_leaves_no_event(people, treasury, events_from_now):
    class ChangedMind(Exception):
        pass

    with pytest.raises(ChangedMind), transaction.atomic():
        treasury.user_set.add(people["alice"])
        raise ChangedMind

    assert events_from_now() == [] and not treasury.user_set.exists()


def test_the_chain_verifies_after_many_membership_changes(people, treasury, reviewers_group):
    for name in ("alice", "bob", "carol"):
        treasury.user_set.add(people[name])
        people[name].groups.remove(reviewers_group)
    treasury.user_set.clear()
    result = verify_chain()
    assert result.ok, result.reason


# --- Attribution under ASGI -------------------------------------------------------------------------


def _signed_in(name: str, pk: int):
    request = RequestFactory().get("/queue/")
    request.user = SimpleNamespace(pk=pk, is_authenticated=True, get_username=lambda: name)
    return request


def test_concurrent_async_requests_each_name_their_own_user():
    """Two requests interleaved on one event loop never see each other's user."""
    seen: dict[str, str] = {}

    async def main() -> None:
        alice_inside, bob_inside = asyncio.Event(), asyncio.Event()

        async def view(request):
            me = request.user.get_username()
            (alice_inside if me == "alice" else bob_inside).set()
            await (bob_inside if me == "alice" else alice_inside).wait()  # both are in flight now
            seen[me] = current_actor()[0].label
            # A sync view, run off the loop as Django runs it, sees the same request.
            seen[f"{me} (sync)"] = (await sync_to_async(current_actor)())[0].label

        middleware = MembershipActorMiddleware(view)
        await asyncio.gather(middleware(_signed_in("alice", 1)), middleware(_signed_in("bob", 2)))

    asyncio.run(main())
    assert seen == {"alice": "alice", "bob": "bob", "alice (sync)": "alice", "bob (sync)": "bob"}
    assert current_actor()[0].kind == "system"  # nothing leaks out of the requests


def test_a_sync_request_names_its_user_only_while_it_runs():
    seen = []
    middleware = MembershipActorMiddleware(lambda request: seen.append(current_actor()))
    middleware(_signed_in("alice", 1))
    assert seen[0][0] == Actor(kind="user", id="1", label="alice") and seen[0][1] == "web"
    assert current_actor()[0].kind == "system"


def test_a_request_with_nobody_signed_in_is_named_as_unauthenticated():
    request = RequestFactory().get("/api/v1/requests/")
    request.user = SimpleNamespace(pk=None, is_authenticated=False)
    seen = []
    MembershipActorMiddleware(lambda request: seen.append(current_actor()))(request)
    assert seen == [(Actor.system("unauthenticated api request"), "api")]


def test_through_the_asgi_handler_the_admin_change_names_grace(
    people, treasury, grace, reviewers_group, events_from_now
):
    """The same admin change served as daphne serves it: async middleware, sync admin view."""
    bob = people["bob"]
    form_page = Client()
    form_page.force_login(grace)
    url = f"/admin/auth/user/{bob.pk}/change/"
    data = _as_submitted(form_page.get(url).context["adminform"].form)
    data["groups"] = [reviewers_group.pk, treasury.pk]

    asgi = AsyncClient()
    asgi.force_login(grace)
    response = async_to_sync(asgi.post)(url, data)

    assert response.status_code == 302
    (event,) = events_from_now()
    assert (event.actor_label, event.metadata["via"], event.metadata["added"]) == ("grace", "admin", [person(bob)])
