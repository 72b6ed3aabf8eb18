"""Agent callbacks subscribe to `request_changed` and follow transitions only: an
approval that does not yet reach the quorum changes nothing the agent waits for."""

from __future__ import annotations

import pytest

from agents.models import CallbackDelivery
from approvals import services
from approvals.states import State
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_callback_is_queued_per_decided_state_not_per_approval(api, people, two_person_rule, settings):
    settings.CALLBACK_PUSH_TASK = False
    response = api.post(
        "/api/v1/actions/",
        {"action_type": "transfer_funds", "params": {"amount": 5}, "callback_url": "http://127.0.0.1:9/agent/cb"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    request_id = response.json()["id"]

    services.approve(
        request_id, revision=current_revision(request_id), actor=services.Person(people["alice"])
    )  # 1 of 2: still pending
    assert not CallbackDelivery.objects.filter(request_id=request_id).exists()

    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["carol"]))
    assert list(CallbackDelivery.objects.filter(request_id=request_id).values_list("state", flat=True)) == [
        State.APPROVED
    ]
