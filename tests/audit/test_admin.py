"""Auditors read the log in the admin; nobody adds, changes or deletes there."""

from __future__ import annotations

import pytest

from audit.chain import Actor, record


@pytest.mark.django_db
def test_the_admin_lists_events_read_only(admin_client):
    record("policy.changed", actor=Actor.system())
    assert admin_client.get("/admin/audit/auditevent/").status_code == 200
    assert admin_client.get("/admin/audit/auditevent/1/change/").status_code == 200  # the view page
    assert admin_client.get("/admin/audit/auditevent/add/").status_code == 403
    assert admin_client.post("/admin/audit/auditevent/1/delete/").status_code == 403
