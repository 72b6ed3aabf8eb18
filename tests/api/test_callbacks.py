"""Signed callbacks, delivered from the database with backoff, every attempt recorded."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.utils import timezone

from agents.callbacks import deliver_due_callbacks
from agents.models import CallbackDelivery
from approvals import services
from controlplane.http.outbound import OutboundURLRefused, check_outbound_url, verify_signature
from tests.api.conftest import EMAIL
from tests.fixtures.revisions import current_revision

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A local HTTP server answering with the statuses it is told, recording what it got."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.received: list[tuple[dict, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append((dict(self.headers), body))
                status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                if status in (301, 302, 307):
                    self.send_header("Location", "http://hooks.example.com/elsewhere")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory():
    made: list[Receiver] = []

    def make(statuses: list[int] | None = None) -> Receiver:
        made.append(Receiver(statuses or []))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def _submit_with_callback(api, url: str) -> str:
    response = api.post("/api/v1/actions/", {**EMAIL, "callback_url": url}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def test_the_decision_is_posted_signed(api, agent, people, receiver_factory):
    receiver = receiver_factory()
    request_id = _submit_with_callback(api, receiver.url)
    services.reject(
        request_id,
        revision=current_revision(request_id),
        actor=services.Person(people["alice"]),
        feedback="Wrong recipient",
    )
    assert deliver_due_callbacks() == 1
    headers, body = receiver.received[0]
    agent.refresh_from_db()
    assert verify_signature(
        agent.callback_secret, headers["X-Controlplane-Timestamp"], body, headers["X-Controlplane-Signature"]
    )
    assert not verify_signature(
        "another-secret", headers["X-Controlplane-Timestamp"], body, headers["X-Controlplane-Signature"]
    )
    payload = json.loads(body)
    assert payload["request_id"] == request_id and payload["state"] == "rejected"
    assert payload["resume_data"] == {"action": "rejected", "feedback": "Wrong recipient"}
    delivery = CallbackDelivery.objects.get()
    assert delivery.delivered_at and delivery.next_attempt_at is None and delivery.last_status == 200
    assert deliver_due_callbacks() == 0  # delivered once


def test_failures_are_retried_with_backoff_and_every_attempt_is_recorded(api, people, receiver_factory, settings):
    settings.CALLBACK_MAX_ATTEMPTS = 3
    receiver = receiver_factory([500, 503, 500])
    request_id = _submit_with_callback(api, receiver.url)
    services.approve(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    assert deliver_due_callbacks() == 1
    delivery = CallbackDelivery.objects.get()
    assert delivery.attempts == 1 and delivery.last_status == 500
    assert delivery.next_attempt_at > timezone.now()
    assert deliver_due_callbacks() == 0  # not due yet
    for _ in range(2):
        deliver_due_callbacks(now=timezone.now() + timedelta(hours=1))
    delivery.refresh_from_db()
    assert delivery.gave_up_at and delivery.next_attempt_at is None
    assert [a.status_code for a in delivery.attempt_log.all()] == [500, 503, 500]
    assert len(receiver.received) == 3


def test_redirects_are_not_followed(api, people, receiver_factory):
    receiver = receiver_factory([302, 200])
    request_id = _submit_with_callback(api, receiver.url)
    services.reject(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    deliver_due_callbacks()
    delivery = CallbackDelivery.objects.get()
    assert delivery.last_status == 302 and "redirects are not followed" in delivery.last_error
    assert len(receiver.received) == 1
    deliver_due_callbacks(now=timezone.now() + timedelta(hours=1))
    delivery.refresh_from_db()
    assert delivery.delivered_at is not None


def test_a_callback_url_removed_from_the_allow_list_is_not_called(api, people, receiver_factory, settings):
    receiver = receiver_factory()
    request_id = _submit_with_callback(api, receiver.url)
    settings.OUTBOUND_URL_ALLOWLIST = ["hooks.example.com"]
    services.reject(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    deliver_due_callbacks()
    assert receiver.received == []
    assert CallbackDelivery.objects.get().last_error.startswith("outbound_url_not_allowed")


def test_a_missed_enqueue_is_recovered_by_the_sweep(api, people, receiver_factory):
    receiver = receiver_factory()
    request_id = _submit_with_callback(api, receiver.url)
    services.reject(request_id, revision=current_revision(request_id), actor=services.Person(people["alice"]))
    CallbackDelivery.objects.all().delete()  # as if the process died right after commit
    assert deliver_due_callbacks() == 1
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    "url, code",
    [
        ("http://10.0.0.5/hook", "outbound_url_private"),
        ("http://169.254.169.254/latest/meta-data", "outbound_url_private"),
        ("http://[::1]:8000/hook", "outbound_url_private"),
        ("http://user:pw@hooks.example.com/", "outbound_url_invalid"),
        ("gopher://hooks.example.com/", "outbound_url_invalid"),
        ("https://hooks.example.com.evil.net/", "outbound_url_not_allowed"),
    ],
)
def test_the_outbound_checker_refuses_private_and_unlisted_urls(url, code):
    allowlist = ["hooks.example.com", "10.0.0.5", "169.254.169.254", "::1"]
    with pytest.raises(OutboundURLRefused) as refused:
        check_outbound_url(url, allowlist=allowlist, allow_private=False, resolve=False)
    assert refused.value.code == code


def test_url_prefix_entries_and_host_patterns_allow(settings):
    assert check_outbound_url(
        "https://a.hooks.example.com/x", allowlist=["*.hooks.example.com"], allow_private=False, resolve=False
    )
    assert check_outbound_url(
        "https://api.example.org/agent/1",
        allowlist=["https://api.example.org/agent/"],
        allow_private=False,
        resolve=False,
    )
    with pytest.raises(OutboundURLRefused):
        check_outbound_url(
            "https://api.example.org/admin",
            allowlist=["https://api.example.org/agent/"],
            allow_private=False,
            resolve=False,
        )
