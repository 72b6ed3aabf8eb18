"""The client checks each decision's signature before it runs anything (live daphne).

Someone between the agent and the server (a proxy, a compromised relay, a stale
cache) rewrites the resume; the decorated tool must not run, and the agent gets
DecisionRefused naming what did not match.
"""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from approvals import services
from approvals.people import Person
from hitl_controlplane.client import ControlPlane, DecisionRefused
from hitl_controlplane.ed25519 import SigningKey
from tests.fixtures.revisions import current_revision

from .conftest import LongPolls, NotingTransport

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class TamperingTransport(NotingTransport):
    """A man in the middle: `rewrite(body)` changes each decided resume before the client reads it."""

    def __init__(self, long_polls: LongPolls, rewrite) -> None:
        super().__init__(long_polls)
        self.rewrite = rewrite

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if not request.url.path.endswith("/resume/"):
            return response
        body = json.loads(response.read())
        if body.get("decided"):
            self.rewrite(body)
        return httpx.Response(response.status_code, json=body)


def client(daphne_server, token, transport, keys) -> ControlPlane:
    return ControlPlane(
        daphne_server.url, token, poll_wait=5, retry_backoff=0.05, transport=transport, public_keys=keys
    )


def test_a_verified_approval_runs_the_tool_with_the_edited_params(
    daphne_server, token, long_polls, people, transfer_rule, reviewer_decides, server_public_key
):
    calls = []
    with client(daphne_server, token, NotingTransport(long_polls), [server_public_key]) as cp:

        @cp.require_approval("transfer_funds")
        def transfer(amount: int, to: str = "acme") -> str:
            calls.append((amount, to))
            return "sent"

        reviewer_decides(
            lambda r: services.approve_with_edits(
                r.pk, revision=current_revision(r.pk), actor=Person(people["alice"]), edits={"amount": 50}
            )
        )
        assert transfer(900) == "sent"
    assert calls == [(50, "acme")]


@pytest.mark.parametrize(
    "attack, refused_for",
    [
        (lambda body: body["resume_data"]["params"].__setitem__("amount", 900_000), "payload_sha256"),
        (lambda body: body["decision_signature"]["signed"].__setitem__("revision", 1), "does not match"),
        (lambda body: body.pop("decision_signature"), "no decision_signature"),
    ],
)
def test_a_resume_altered_in_transit_never_runs_the_tool(
    daphne_server, token, long_polls, people, transfer_rule, reviewer_decides, server_public_key, attack, refused_for
):
    calls = []
    with client(daphne_server, token, TamperingTransport(long_polls, attack), [server_public_key]) as cp:

        @cp.require_approval("transfer_funds")
        def transfer(amount: int) -> str:
            calls.append(amount)
            return "sent"

        reviewer_decides(
            lambda r: services.approve_with_edits(
                r.pk, revision=current_revision(r.pk), actor=Person(people["alice"]), edits={"amount": 50}
            )
        )
        with pytest.raises(DecisionRefused, match=refused_for):
            transfer(900)
    assert calls == []


def test_an_approval_replayed_onto_another_request_is_refused(
    daphne_server, token, long_polls, people, reviewer_decides, server_public_key
):
    """The attacker answers the agent's second call with the first call's genuine, signed approval."""
    with client(daphne_server, token, NotingTransport(long_polls), [server_public_key]) as cp:
        reviewer_decides(
            lambda r: services.approve(r.pk, revision=current_revision(r.pk), actor=Person(people["alice"]))
        )
        first = cp.request_approval("send_email", params={"to": "dana@example.com"}, tool_call_id="call_1", timeout=15)
        assert first.approved and first.decision["tool_call_id"] == "call_1"
        second = cp.submit_action("send_email", params={"to": "everyone@example.com"}, tool_call_id="call_2")
    replayed = {**first.raw, "request_id": second["id"]}

    def replay(body: dict) -> None:
        body.clear()
        body.update(replayed)

    with client(daphne_server, token, TamperingTransport(long_polls, replay), [server_public_key]) as cp:
        services.approve(second["id"], revision=current_revision(second["id"]), actor=Person(people["alice"]))
        with pytest.raises(DecisionRefused, match="request_id"):
            cp.wait(second["id"], tool_call_id="call_2", timeout=15)


def test_a_client_pinned_to_another_key_refuses_the_servers_decisions(
    daphne_server, token, long_polls, people, reviewer_decides
):
    stranger = SigningKey.from_secret("not the server's key").public_text
    with client(daphne_server, token, NotingTransport(long_polls), [stranger]) as cp:
        reviewer_decides(
            lambda r: services.approve(r.pk, revision=current_revision(r.pk), actor=Person(people["alice"]))
        )
        with pytest.raises(DecisionRefused, match="does not trust"):
            cp.request_approval("send_email", params={"to": "dana@example.com"}, timeout=15)


def test_without_a_key_the_client_says_once_that_nothing_is_verified(
    daphne_server, token, long_polls, people, reviewer_decides, caplog, monkeypatch
):
    import hitl_controlplane.client._core as core

    monkeypatch.setattr(core, "_warned_unverified", False)
    monkeypatch.delenv("CONTROLPLANE_PUBLIC_KEYS", raising=False)
    with client(daphne_server, token, NotingTransport(long_polls), None) as cp, caplog.at_level(logging.WARNING):
        for _ in range(2):
            reviewer_decides(
                lambda r: services.approve(r.pk, revision=current_revision(r.pk), actor=Person(people["alice"]))
            )
            assert cp.request_approval("send_email", params={"to": "dana@example.com"}, timeout=15).decision is None
    warnings = [r for r in caplog.records if "NOT verified" in r.getMessage()]
    assert len(warnings) == 1


def test_the_key_can_come_from_the_environment(
    daphne_server, token, long_polls, people, reviewer_decides, server_public_key, monkeypatch
):
    monkeypatch.setenv("CONTROLPLANE_PUBLIC_KEYS", f"{SigningKey.from_secret('old').public_text},{server_public_key}")
    with client(daphne_server, token, NotingTransport(long_polls), None) as cp:
        reviewer_decides(
            lambda r: services.approve(r.pk, revision=current_revision(r.pk), actor=Person(people["alice"]))
        )
        assert cp.request_approval("send_email", params={"to": "dana@example.com"}, timeout=15).decision
