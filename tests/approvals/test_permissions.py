"""Who may see and decide a request: guardian object permissions through a group or
granted to the person directly, whichever query shape `permissions` picks."""

from __future__ import annotations

from django.contrib.auth.models import Group

from approvals import permissions
from approvals.models import ApprovalRequestGroupObjectPermission, ApprovalRequestUserObjectPermission
from approvals.web import queue_queries


def _grant_directly(user, request, *codenames: str) -> None:
    ApprovalRequestUserObjectPermission.objects.bulk_create(
        ApprovalRequestUserObjectPermission(
            content_object=request, user=user, permission_id=permissions._permission_id(codename)
        )
        for codename in codenames
    )


def test_a_direct_permission_alone_puts_a_request_in_the_queue(people, submit):
    email, other = submit("send_email"), submit("send_email")
    mallory = people["mallory"]  # in no group
    assert list(permissions.decidable_by(mallory)) == []
    _grant_directly(mallory, email, permissions.DECIDE)
    assert list(permissions.decidable_by(mallory)) == [email]
    assert list(permissions.with_view_grant(mallory)) == []  # decide does not imply view
    _grant_directly(mallory, other, permissions.VIEW)
    assert list(permissions.with_view_grant(mallory)) == [other]
    assert [r.pk for r in queue_queries.queue(mallory)] == [email.pk]


def test_group_and_direct_grants_add_up_without_duplicates(people, submit):
    routed = submit("send_email")  # granted to the reviewers group, alice among them
    elsewhere = submit("send_email")
    finance = Group.objects.create(name="finance")
    ApprovalRequestGroupObjectPermission.objects.filter(content_object=elsewhere).update(group=finance)
    alice = people["alice"]
    assert set(permissions.decidable_by(alice)) == {routed}
    _grant_directly(alice, elsewhere, permissions.DECIDE, permissions.VIEW)
    _grant_directly(alice, routed, permissions.DECIDE)  # also held through her group
    assert sorted(r.pk for r in permissions.decidable_by(alice)) == sorted([routed.pk, elsewhere.pk])
    alice.groups.add(finance)  # a second group holding the same request: still listed once
    assert permissions.decidable_by(alice).count() == 2


def test_a_group_grant_for_another_permission_does_not_count(people, submit):
    request = submit("send_email")
    ApprovalRequestGroupObjectPermission.objects.filter(
        content_object=request, permission_id=permissions._permission_id(permissions.DECIDE)
    ).delete()
    alice = people["alice"]
    assert list(permissions.decidable_by(alice)) == []
    assert list(permissions.with_view_grant(alice)) == [request]


def test_inactive_and_anonymous_people_hold_nothing(people, submit):
    from django.contrib.auth.models import AnonymousUser

    submit("send_email")
    alice = people["alice"]
    alice.is_active = False
    assert list(permissions.decidable_by(alice)) == []
    assert list(permissions.with_view_grant(AnonymousUser())) == []


def test_the_starting_queryset_is_narrowed_not_replaced(people, submit):
    first, second = submit("send_email"), submit("send_email")
    narrowed = permissions.decidable_by(people["alice"], first.__class__.objects.filter(pk=second.pk))
    assert list(narrowed) == [second]
