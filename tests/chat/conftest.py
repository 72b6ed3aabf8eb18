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
    """Records every call; answers like Slack: `ok: false` for what Slack refuses (blocks
    over its bounds, a dead trigger_id), 429 with Retry-After when told to (`limit`), late
    when told to (`slow`)."""

    TRIGGER_SECONDS = 3.0

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.refused: list[tuple[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.messages = 0
        self.triggers: dict[str, float] = {}
        self.limits: dict[str, list[int | None]] = {}
        self.delays: dict[str, float] = {}
        self.lock = threading.Lock()
        self.answered: list[tuple[str, int, float, dict]] = []  # (method, status, monotonic time, args)
        self.refuse_ts = ""  # chat.update of this ts: message_not_found

    def trigger(self, *, age: float = 0.0) -> str:
        """A trigger_id as Slack puts in a press, issued `age` seconds ago."""
        trigger_id = f"{len(self.triggers) + 1}.TRIGGER"
        self.triggers[trigger_id] = time.monotonic() - age
        return trigger_id

    def limit(self, method: str, retry_after: int, *, times: int = 1, after: int = 0) -> None:
        """Answer `method` 429 with `retry_after`, `times` times, after `after` calls that pass."""
        self.limits.setdefault(method, []).extend([None] * after + [retry_after] * times)

    def slow(self, method: str, seconds: float) -> None:
        self.delays[method] = seconds

    def refusal(self, method: str, args: dict) -> str:
        if method == "views.open":
            issued = self.triggers.get(str(args.get("trigger_id")))
            if issued is None:
                return "invalid_trigger_id"
            if time.monotonic() - issued > self.TRIGGER_SECONDS:
                return "expired_trigger_id"
            view = _json(args.get("view")) or {}
            return invalid_blocks(view.get("blocks") or [])
        if method == "chat.update" and self.refuse_ts and args.get("ts") == self.refuse_ts:
            return "message_not_found"
        if method in ("chat.postMessage", "chat.update"):
            return invalid_blocks(_json(args.get("blocks")) or [])
        return ""

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
                time.sleep(fake.delays.get(method, 0))
                with fake.lock:
                    limited = fake.limits.get(method)
                    retry_after = limited.pop(0) if limited else None
                    if retry_after is None:
                        fake.calls.append((method, args))
                fake.answered.append((method, 200 if retry_after is None else 429, time.monotonic(), args))
                if retry_after is not None:
                    fake.refused.append((method, "ratelimited"))
                    self._answer({"ok": False, "error": "ratelimited"}, status=429, retry_after=retry_after)
                    return
                answer: dict = {"ok": True}
                refused = fake.refusal(method, args)
                if refused:
                    fake.refused.append((method, refused))
                    answer = {"ok": False, "error": refused}
                elif method == "chat.postMessage":
                    with fake.lock:
                        fake.messages += 1
                        answer |= {"channel": "D" + str(args.get("channel")), "ts": f"1700000000.{fake.messages:06d}"}
                elif method == "chat.update":
                    answer |= {"channel": args.get("channel"), "ts": args.get("ts")}
                self._answer(answer)

            def _answer(self, answer: dict, *, status: int = 200, retry_after: int | None = None) -> None:
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler

    def called(self, method: str) -> list[dict]:
        return [args for name, args in self.calls if name == method]


def _json(value):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def invalid_blocks(blocks: list) -> str:
    """Slack's bounds (api.slack.com/reference/block-kit): at most 50 blocks, a section's
    text at most 3,000 characters, a button's value at most 2,000."""
    if len(blocks) > 50:
        return "invalid_blocks"
    for block in blocks:
        if block.get("type") == "section" and len((block.get("text") or {}).get("text", "")) > 3000:
            return "invalid_blocks"
        for element in block.get("elements") or []:
            if element.get("type") == "button" and len(element.get("value", "")) > 2000:
                return "invalid_blocks"
    return ""


@pytest.fixture
def fake_slack(settings):
    fake = FakeSlack()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    settings.SLACK_API_URL = fake.url + "api/"
    settings.OUTBOUND_URL_ALLOWLIST = ["127.0.0.1"]  # the Web API base passes the outbound rules
    settings.OUTBOUND_ALLOW_PRIVATE = True  # the fake listens on loopback
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

    def _press(
        request, action: str = "approve", *, slack_user: str = "U_ALICE", revision=None, team=TEAM, trigger=None, **sign
    ):
        value = f"{request.pk}:{request.current_revision if revision is None else revision}"
        payload = {
            "type": "block_actions",
            "user": {"id": slack_user, "team_id": team},
            "team": {"id": team},
            "trigger_id": fake_slack.trigger() if trigger is None else trigger,
            "response_url": fake_slack.url + "hooks/respond",
            "actions": [{"action_id": action, "value": value}],
        }
        return post_payload(client, payload, **sign)

    return _press


def post_payload(client, payload: dict, **sign):
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return client.generic(
        "POST", "/slack/interactivity/", body, content_type="application/x-www-form-urlencoded", **signed(body, **sign)
    )


def modal_submission(opened: dict, feedback: str | None, *, slack_user: str = "U_ALICE", team: str = TEAM) -> dict:
    """The view_submission Slack sends when the person submits the modal `opened` (views.open's view)."""
    return {
        "type": "view_submission",
        "user": {"id": slack_user, "team_id": team},
        "team": {"id": team},
        "view": {
            "callback_id": opened["callback_id"],
            "private_metadata": opened["private_metadata"],
            "state": {"values": {"feedback": {"feedback": {"type": "plain_text_input", "value": feedback}}}},
        },
    }


@pytest.fixture
def reject_with(client, fake_slack, press):
    """Press Reject, then submit the modal that opened with `feedback`."""

    def _reject(request, feedback: str | None, *, slack_user: str = "U_ALICE", **press_args):
        assert press(request, "reject", slack_user=slack_user, **press_args).status_code == 200
        opened = fake_slack.called("views.open")[-1]["view"]
        return post_payload(client, modal_submission(opened, feedback, slack_user=slack_user))

    return _reject


@pytest.fixture
def slack_links(people):
    for name in ("alice", "owen", "mallory"):
        SlackLink.objects.create(user=people[name], team_id=TEAM, slack_user_id=f"U_{name.upper()}")
