"""The built-in executors against real endpoints, and the runtime's health and relay endpoints."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core import mail
from django.utils import timezone

from approvals.execution.executors import ExecutionContext, PermanentExecutionError, RetryableExecutionError, get
from controlplane import channel_relay, health
from tests.live import free_port


def context(**overrides) -> ExecutionContext:
    fields = {
        "request_id": "7c3e0d52-0000-4000-8000-000000000001",
        "action_type": "notify_webhook",
        "target": {},
        "params": {"text": "deploy finished", "count": 3},
        "idempotency_key": "cp-7c3e0d52-r1",
        "attempt": 1,
        "deadline": timezone.now() + timedelta(seconds=30),
        **overrides,
    }
    return ExecutionContext(**fields)


class TestWebhook:
    def test_one_signed_post_with_the_key_and_exactly_the_params(self, receiver, outbound_loopback, settings):
        result = get("webhook").run(context(target={"url": f"{receiver.url}/hooks/deploy"}))
        assert result == {"status": 200, "response_bytes": len(b'{"ok": true}')}
        [post] = receiver.posts
        assert post["path"] == "/hooks/deploy"
        assert post["headers"]["Idempotency-Key"] == "cp-7c3e0d52-r1"
        assert json.loads(post["body"]) == {"text": "deploy finished", "count": 3}
        timestamp = post["headers"]["X-Controlplane-Timestamp"]
        expected = hmac.new(
            settings.EXECUTOR_WEBHOOK_SECRET.encode(), timestamp.encode() + b"." + post["body"], hashlib.sha256
        ).hexdigest()
        assert post["headers"]["X-Controlplane-Signature"] == f"sha256={expected}"

    def test_a_redirect_is_not_followed(self, receiver, outbound_loopback):
        with pytest.raises(PermanentExecutionError) as refused:
            get("webhook").run(context(target={"url": f"{receiver.url}/redirect"}))
        assert refused.value.code == "webhook_redirect_refused"
        assert len(receiver.posts) == 1

    def test_a_url_off_the_allow_list_is_never_called(self, receiver, settings):
        settings.OUTBOUND_URL_ALLOWLIST = ["https://hooks.example.com/"]
        settings.OUTBOUND_ALLOW_PRIVATE = True
        with pytest.raises(PermanentExecutionError) as refused:
            get("webhook").run(context(target={"url": f"{receiver.url}/hooks"}))
        assert refused.value.code == "outbound_url_not_allowed"
        assert receiver.posts == []

    def test_loopback_is_refused_unless_private_addresses_are_allowed(self, receiver, settings):
        settings.OUTBOUND_URL_ALLOWLIST = ["127.0.0.1"]
        settings.OUTBOUND_ALLOW_PRIVATE = False
        with pytest.raises(PermanentExecutionError) as refused:
            get("webhook").run(context(target={"url": f"{receiver.url}/hooks"}))
        assert refused.value.code == "outbound_url_private"

    def test_nobody_listening_is_retryable_because_nothing_was_sent(self, outbound_loopback):
        with pytest.raises(RetryableExecutionError):
            get("webhook").run(context(target={"url": f"http://127.0.0.1:{free_port()}/hooks"}))


class TestEmail:
    def test_it_sends_the_approved_mail_once_with_the_key(self, settings):
        settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
        params = {"to": ["dana@example.com"], "cc": "erin@example.com", "subject": "Hi", "body": "Hello"}
        result = get("email").run(context(action_type="send_email", params=params))
        [message] = mail.outbox
        assert (message.to, message.cc, message.subject, message.body) == (
            ["dana@example.com"],
            ["erin@example.com"],
            "Hi",
            "Hello",
        )
        assert message.extra_headers["X-Idempotency-Key"] == "cp-7c3e0d52-r1"
        assert result["recipients"] == 2 and result["sent"] == 1

    def test_bad_recipients_fail_permanently(self, settings):
        settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
        with pytest.raises(PermanentExecutionError):
            get("email").run(context(action_type="send_email", params={"to": ["not-an-address"]}))
        assert mail.outbox == []


class TestHealth:
    def test_healthz_answers_without_touching_anything(self, client, db, django_assert_num_queries):
        with django_assert_num_queries(0):
            response = client.get("/healthz")
        assert response.json() == {"status": "ok"}

    def test_readyz_checks_database_broker_and_channel_layer(self, client, db):
        response = client.get("/readyz")
        body = response.json()
        assert response.status_code == 200, body
        assert body["status"] == "ready"
        assert set(body["checks"]) == {"database", "broker", "channel_layer"}
        assert all(check["ok"] for check in body["checks"].values())

    def test_readyz_names_the_failing_dependency(self, client, db, monkeypatch):
        def broker_down() -> None:
            raise ConnectionRefusedError("broker unreachable")

        monkeypatch.setitem(health.CHECKS, "broker", broker_down)
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["broker"] == {
            "ok": False,
            "ms": response.json()["checks"]["broker"]["ms"],
            "error": "ConnectionRefusedError: broker unreachable",
        }


@pytest.fixture
def relay_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "controlplane.channel_relay.RelayChannelLayer"}}
    settings.CHANNEL_RELAY_URL = ""
    return get_channel_layer()


class TestChannelRelay:
    def _post(self, client, payload: dict, *, signature: str | None = None):
        body = json.dumps(payload).encode()
        return client.post(
            channel_relay.RELAY_PATH,
            data=body,
            content_type="application/json",
            headers={"X-Relay-Signature": signature or channel_relay.sign(body)},
        )

    def test_a_signed_message_reaches_the_group_in_this_process(self, client, relay_layer):
        channel = async_to_sync(relay_layer.new_channel)()
        async_to_sync(relay_layer.group_add)("request-42", channel)
        message = {"type": "request.change", "state": "succeeded"}
        response = self._post(
            client, {"op": "group_send", "target": "request-42", "message": message, "ts": int(time.time())}
        )
        assert response.status_code == 204
        assert async_to_sync(relay_layer.receive)(channel) == message

    @pytest.mark.parametrize("tamper", ["signature", "stale"])
    def test_unsigned_or_stale_messages_are_refused(self, client, relay_layer, tamper):
        ts = int(time.time()) - (120 if tamper == "stale" else 0)
        payload = {"op": "group_send", "target": "request-42", "message": {"type": "x"}, "ts": ts}
        response = self._post(client, payload, signature="0" * 64 if tamper == "signature" else None)
        assert response.status_code == 403

    def test_a_relaying_process_posts_instead_of_delivering_locally(self, relay_layer, settings, monkeypatch):
        sent: list[tuple[str, dict]] = []
        monkeypatch.setattr(channel_relay, "_post", lambda url, payload: sent.append((url, payload)))
        settings.CHANNEL_RELAY_URL = "http://127.0.0.1:8000"
        async_to_sync(relay_layer.group_send)("agent-7", {"type": "request.change"})
        assert sent == [
            ("http://127.0.0.1:8000", {"op": "group_send", "target": "agent-7", "message": {"type": "request.change"}})
        ]
