"""What the client-binding stories share (tests/guards/test_client_binding_*.py; issue 22, item 5):
a proxy between the agent and the server (an httpx transport wrapped around the server itself,
in process) that rewrites answers, mail-bot's client pinned to the server's key talking
through it, and alice deciding.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.test import APIClient

from approvals import services
from approvals.models import ApprovalRequest
from approvals.people import Person
from hitl_controlplane.client import ControlPlane

SUBMIT = "/api/v1/actions/"
PLANS = "/api/v1/plans/"
PARAMS = {"amount": 900, "to": "acme", "memo": "Rechnung №42 – grüße"}


class Proxy(httpx.BaseTransport):
    """The server (in process, through WSGI) behind someone who rewrites its answers.

    `on_submitted(id)`: runs when a submission's answer passes (a reviewer deciding it).
    `submission(body)`: rewrites the submission answer in place. `resume(body, path)`:
    returns what the client reads instead of a resume answer (None: the answer as is).
    """

    def __init__(self) -> None:
        self.server = httpx.WSGITransport(app=WSGIHandler())
        self.on_submitted: Callable[[str], object] | None = None
        self.submission: Callable[[dict], object] | None = None
        self.resume: Callable[[dict, str], dict] | None = None
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path))
        # As Django's test client does: the test's own connection (and transaction) serves the request.
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = self.server.handle_request(request)
            response.read()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
        path = request.url.path
        if request.method == "POST" and path in (SUBMIT, PLANS) and response.status_code in (200, 201):
            body = json.loads(response.read())
            if self.on_submitted:
                self.on_submitted(body["id"])
            if self.submission:
                self.submission(body)
            return httpx.Response(response.status_code, json=body)
        if path.endswith("/resume/") and self.resume:
            replaced = self.resume(json.loads(response.read()), path)
            if replaced is not None:
                return httpx.Response(200, json=replaced)
        return response


@pytest.fixture
def binding_proxy() -> Proxy:
    return Proxy()


@pytest.fixture
def keys(server_public_key) -> list[str]:
    return [server_public_key]


@pytest.fixture
def pinned_cp(token, binding_proxy, keys):
    """mail-bot's client, pinned to the server's key, talking through the proxy."""
    with ControlPlane(
        "http://testserver", token, poll_wait=0.2, retries=0, transport=binding_proxy, public_keys=keys
    ) as client:
        yield client


@pytest.fixture
def alice_person(people) -> Person:
    return Person(people["alice"])


@pytest.fixture
def decided(token, alice_person):
    """`decided(verdict="approve", token=..., **submission)`: a request submitted and decided, its id."""

    def _decided(verdict: str = "approve", *, with_token: str | None = None, **submission) -> str:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {with_token or token}")
        body = {"action_type": "transfer_funds", "params": PARAMS, **submission}
        key = body.pop("idempotency_key", None)
        response = api.post(SUBMIT, body, format="json", **({"HTTP_IDEMPOTENCY_KEY": key} if key else {}))
        assert response.status_code == 201, response.content
        request_id = response.json()["id"]
        getattr(services, verdict)(request_id, actor=alice_person, revision=1)
        return request_id

    return _decided


def swap_id_to(old_id: str) -> Callable[[dict], object]:
    return lambda body: body.__setitem__("id", old_id)


def untouched(*request_ids: str) -> None:
    """Nothing was claimed or run for these requests."""
    for request_id in request_ids:
        request = ApprovalRequest.objects.get(pk=request_id)
        assert (request.state, request.attempts, request.result) == ("approved", 0, None), request_id
