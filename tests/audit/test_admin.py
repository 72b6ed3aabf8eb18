"""Auditors read the log in the admin; nobody adds, changes or deletes there."""

from __future__ import annotations

import pytest

from audit.chain import Actor, record


@pytest.fixture
def superuser_client(client, django_user_model):
    """root, a Django superuser: holds every admin permission there is."""
    root = django_user_model.objects.create_superuser("root", email="root@example.com", password="root-pw-123!")
    client.force_login(root)
    return client


@pytest.mark.django_db
def test_the_admin_lists_events_read_only(superuser_client):
    record("policy.changed", actor=Actor.system())
    assert superuser_client.get("/admin/audit/auditevent/").status_code == 200
    assert superuser_client.get("/admin/audit/auditevent/1/change/").status_code == 200  # the view page
    assert superuser_client.get("/admin/audit/auditevent/add/").status_code == 403
    assert superuser_client.post("/admin/audit/auditevent/1/delete/").status_code == 403
