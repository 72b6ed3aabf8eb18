"""Schemathesis over the whole agent API as agent B, aiming at agent A's requests.

Path ids are drawn from both agents' real request ids (generated ids would only
ever meet 404s), so every operation is tried against A's requests: B gets no
2xx and no 409 for them (a 409 would confirm they exist), never sees A's ids or
secrets in any body, and its list shows exactly its own requests. Any 5xx fails
too. Runs in process (WSGI) inside the test's transaction.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient
from schemathesis import checks as sc

from agents.models import Agent
from agents.services import issue_token
from approvals import services
from approvals.models import ApprovalRequest
from approvals.states import Kind
from controlplane.http.pagination import NewestFirstCursorPagination

pytestmark = pytest.mark.django_db

SECRETS = ("a-secret-run", "a-secret-key", "a-secret-subject")


@pytest.fixture
def in_process_app():
    """The WSGI app, kept from closing the test's connection between requests
    (what Django's own test client does)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def two_agents(people, agent):
    """A (mail-bot) with three requests carrying secrets; B (ops-bot) with one of its own."""
    rival = Agent.objects.create(name="ops-bot", owner=people["carol"])
    a_ids = [
        str(
            services.submit(
                services.Submission(
                    kind=Kind.ACTION,
                    action_type="send_email",
                    target={"mailbox": "outbox"},
                    params={"to": ["dana@example.com"], "subject": SECRETS[2], "body": "x"},
                    run_id=SECRETS[0],
                    idempotency_key=SECRETS[1],
                ),
                agent=agent,
            ).pk
        ),
        str(
            services.submit(
                services.Submission(kind=Kind.PLAN, plan_path="p.md", plan_title="A's plan", plan_markdown="# A"),
                agent=agent,
            ).pk
        ),
        str(
            services.submit(
                services.Submission(kind=Kind.ACTION, action_type="read_notes", params={"path": "a.txt"}), agent=agent
            ).pk
        ),
    ]
    b_ids = [
        str(
            services.submit(
                services.Submission(kind=Kind.ACTION, action_type="update_document", params={"doc": "b"}), agent=rival
            ).pk
        )
    ]
    return {"a_ids": a_ids, "b_ids": b_ids, "b_token": issue_token(rival).secret, "rival": rival}


def test_agent_b_never_sees_agent_a(two_agents, in_process_app):
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", in_process_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    a_ids, b_ids = two_agents["a_ids"], two_agents["b_ids"]
    auth = {"Authorization": f"Bearer {two_agents['b_token']}"}
    seen: list[tuple[str, int]] = []
    aimed: list[str] = []

    for operation in operations:

        @given(case=operation.as_strategy(), data=st.data())
        @settings(
            max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case, data) -> None:
            aimed_at_a = False
            if case.path_parameters and "id" in case.path_parameters:
                case.path_parameters["id"] = data.draw(st.sampled_from(a_ids + b_ids))
                aimed_at_a = case.path_parameters["id"] in a_ids
            response = case.call(headers=auth)
            seen.append((operation.label, response.status_code))  # noqa: B023 (check() runs within this iteration)
            case.validate_response(response, checks=[sc.not_a_server_error])
            text = response.text
            for leaked in (*a_ids, *SECRETS):
                assert leaked not in text, (operation.label, leaked, response.status_code)  # noqa: B023 (check() runs within this iteration)
            if aimed_at_a:
                aimed.append(operation.label)  # noqa: B023 (check() runs within this iteration)
                assert response.status_code not in {200, 201, 202, 204, 409}, (operation.label, response.status_code)  # noqa: B023 (check() runs within this iteration)

        check()

    assert len(seen) >= 2 * len(operations)

    # The list, asked plainly: B's own requests only (schemathesis may have added some), none of A's.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=auth["Authorization"])
    listed = {item["id"] for item in json.loads(client.get("/api/v1/requests/").content)["results"]}
    b_owned = {str(pk) for pk in ApprovalRequest.objects.filter(agent=two_agents["rival"]).values_list("pk", flat=True)}
    assert set(b_ids) <= listed <= b_owned
    assert len(listed) == min(len(b_owned), NewestFirstCursorPagination.page_size)
    assert not listed & set(a_ids)
    assert len(set(aimed)) >= 5  # every {id} operation was tried on A's requests (and refused)
    # Filtering by A's own identifiers finds nothing either.
    for name, value in (("run_id", SECRETS[0]), ("idempotency_key", SECRETS[1])):
        assert json.loads(client.get(f"/api/v1/requests/?{name}={value}").content)["results"] == []
