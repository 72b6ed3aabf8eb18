"""A fake Slack Web API on loopback (records every call the real `slack-sdk` makes,
answers like Slack), signed interaction payloads, and Celery run eagerly as the unit
tests of tasks do."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from approvals.models import SlackLink
from controlplane.celery import app as celery_app

SIGNING_SECRET = "test-signing-secret-" + "x" * 20
TEAM = "T0TEAM"


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.messages = 0

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                try:
                    args = json.loads(body)
                except ValueError:
                    args = {k: v[0] for k, v in parse_qs(body).items()}
                method = self.path.strip("/").rsplit("/", 1)[-1]
                fake.calls.append((method, args))
                answer: dict = {"ok": True}
                if method == "chat.postMessage":
                    fake.messages += 1
                    answer |= {"channel": "D" + str(args.get("channel")), "ts": f"1700000000.{fake.messages:06d}"}
                if method == "chat.update":
                    answer |= {"channel": args.get("channel"), "ts": args.get("ts")}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler

    def called(self, method: str) -> list[dict]:
        return [args for name, args in self.calls if name == method]


@pytest.fixture
def fake_slack(settings):
    fake = FakeSlack()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    settings.SLACK_API_URL = fake.url + "api/"
    settings.SLACK_RESPONSE_URL_PREFIX = fake.url + "hooks/"
    settings.SLACK_BOT_TOKEN = "xoxb-test"
    settings.SLACK_SIGNING_SECRET = SIGNING_SECRET
    settings.SLACK_TEAM_ID = TEAM
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.fixture
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def signed(body: bytes, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": ts, "HTTP_X_SLACK_SIGNATURE": signature}


@pytest.fixture
def press(client, fake_slack, eager_celery):
    """Post a signed block_actions payload, as Slack does, for Slack user `slack_user`."""

    def _press(request, action: str = "approve", *, slack_user: str = "U_ALICE", revision=None, team=TEAM, **sign):
        value = f"{request.pk}:{request.current_revision if revision is None else revision}"
        payload = {
            "type": "block_actions",
            "user": {"id": slack_user, "team_id": team},
            "team": {"id": team},
            "response_url": fake_slack.url + "hooks/respond",
            "actions": [{"action_id": action, "value": value}],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return client.generic(
            "POST",
            "/slack/interactivity/",
            body,
            content_type="application/x-www-form-urlencoded",
            **signed(body, **sign),
        )

    return _press


@pytest.fixture
def slack_links(people):
    for name in ("alice", "owen", "mallory"):
        SlackLink.objects.create(user=people[name], team_id=TEAM, slack_user_id=f"U_{name.upper()}")
