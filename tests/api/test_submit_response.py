"""A new submission is answered from what `submit` wrote, without reading it back:
the answer must be the request exactly as a later read shows it."""

from __future__ import annotations

import pytest

from tests.api.conftest import EMAIL, PLAN_MD

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/actions/", EMAIL),
        ("/api/v1/actions/", {"action_type": "read_file", "params": {"path": "notes.txt"}}),  # auto-approved
        ("/api/v1/actions/", {"action_type": "delete_database", "params": {"name": "prod"}}),  # refused
        ("/api/v1/plans/", {"path": "p.md", "plan": PLAN_MD}),
    ],
)
def test_the_submit_response_is_the_stored_request(api, path, body):
    response = api.post(path, body, format="json")
    assert response.status_code == 201
    submitted = response.json()
    resume = submitted.pop("resume")
    assert submitted == api.get(f"/api/v1/requests/{submitted['id']}/").json()
    assert resume == api.get(f"/api/v1/requests/{submitted['id']}/resume/").json()
