"""Slack end to end, every part real: an agent submits through daphne, the Celery worker
sends the linked reviewers their direct messages (the notification outbox) to the fake
Slack Web API on loopback, signed presses and modal submissions go to daphne's real
endpoint, the worker decides and updates every message; a decision in the browser
updates them too."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from urllib.parse import urlencode

import pytest

from agents.services import issue_token
from approvals.models import ApprovalRequest, Decision, SlackLink, SlackMessage
from approvals.notifications import dispatch
from approvals.people import Person
from approvals.states import State
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, _server_can_check
from tests.chat.conftest import SIGNING_SECRET, TEAM, FakeSlack, signed
from tests.fixtures.services import missing_service

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
BOT_TOKEN = "xoxb-" + secrets.token_hex(24)


@pytest.fixture(scope="module")
def fake_slack_api() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


# The fake Slack listens on loopback; its base must pass the outbound rules (the worker's
# harness allows loopback already).
LOOPBACK_SLACK = {"OUTBOUND_URL_ALLOWLIST": "127.0.0.1", "OUTBOUND_ALLOW_PRIVATE": "1"}


@pytest.fixture(scope="module")
def slack_env(fake_slack_api) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_TEAM_ID": TEAM,
        "SLACK_API_URL": fake_slack_api.url + "api/",
        "SLACK_RESPONSE_URL_PREFIX": fake_slack_api.url + "hooks/",
    }


@pytest.fixture(scope="module")
def slack_daphne(django_db_setup, django_db_blocker, slack_env) -> Iterator:
    """A daphne that knows Slack (the fake's URLs, the signing secret, the bot token)."""
    from tests.live import DaphneServer, child_environment

    with django_db_blocker.unblock():
        server = DaphneServer(env=child_environment(MFA_REQUIRED_GROUPS="", **slack_env, **LOOPBACK_SLACK))
    yield server
    server.stop()


@pytest.fixture
def slack_worker(slack_env) -> Iterator:
    """A worker per test: each test's flush re-seeds groups and permissions under new ids,
    which a worker that lived through the flush would still have cached."""
    from tests.execution.harness import Worker

    worker = Worker(**slack_env)
    yield worker
    worker.stop()


@pytest.fixture(scope="module")
def slack_browser(slack_daphne) -> Iterator:
    """Debian's chromium through Playwright (as tests/browser/conftest.py does; started after
    the database and daphne, since its event loop in this thread makes Django refuse ORM work
    unless DJANGO_ALLOW_ASYNC_UNSAFE, which only this process gets)."""
    if not os.access(CHROMIUM, os.X_OK):
        missing_service(f"needs Debian chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    manager = sync_playwright()
    playwright = manager.start()
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()
    manager.__exit__(None, None, None)
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def signed_in_page(browser, server_url: str, user, password: str):
    context = browser.new_context(base_url=server_url, viewport=VIEWPORT)
    context.set_default_timeout(10_000)
    username = _server_can_check(user, password)
    page = context.new_page()
    page.goto("/login/")
    page.fill("#id_login", username)
    page.fill("#id_password", password)
    page.click("form button[type=submit]")
    page.wait_for_url(server_url + "/")
    return page


@pytest.fixture
def fake(fake_slack_api) -> FakeSlack:
    fake_slack_api.calls.clear()
    fake_slack_api.refused.clear()
    fake_slack_api.answered.clear()
    return fake_slack_api


def eventually(check: Callable[[], object], what: str, timeout: float = 20.0, log: Callable[[], str] = str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}\n{log()[-3000:]}")


def post_to_daphne(url: str, payload: dict) -> tuple[int, float]:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        **{name.removeprefix("HTTP_").replace("_", "-").title(): value for name, value in signed(body).items()},
    }
    started = time.monotonic()
    with urllib.request.urlopen(
        urllib.request.Request(url + "/slack/interactivity/", data=body, headers=headers), timeout=10
    ) as answer:
        return answer.status, time.monotonic() - started


def submit_through_api(server_url: str, token: str, key: str) -> str:
    request = urllib.request.Request(
        server_url + "/api/v1/actions/",
        method="POST",
        data=json.dumps(
            {
                "action_type": "send_email",
                "target": {"mailbox": "outbox"},
                "params": {"to": ["dana@example.com"], "subject": "Numbers", "body": "Attached."},
                "idempotency_key": key,
            }
        ).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=15) as answer:
        return json.load(answer)["id"]


@pytest.fixture
def shown_in_slack(require_redis, slack_daphne, slack_worker, fake, people, admin_user, agent):
    """`shown_in_slack(key)`: a request submitted through daphne whose direct messages the
    worker has posted to alice and bob (linked reviewers) through the notification outbox."""
    dispatch.save_settings("send_email_default", actor=Person(admin_user), notify_on_arrival=True)
    agent_token = issue_token(agent, label="slack end to end").secret
    for name in ("alice", "bob"):
        SlackLink.objects.create(user=people[name], team_id=TEAM, slack_user_id=f"U_{name.upper()}")

    def _shown(key: str) -> str:
        request_id = submit_through_api(slack_daphne.url, agent_token, key)
        eventually(
            lambda: SlackMessage.objects.filter(request_id=request_id).count() == 2,
            "the worker posted both direct messages",
            log=slack_worker.log,
        )
        return request_id

    return _shown


def press_payload(fake: FakeSlack, request_id: str, action: str, slack_user: str = "U_ALICE") -> dict:
    revision = ApprovalRequest.objects.get(pk=request_id).current_revision
    return {
        "type": "block_actions",
        "user": {"id": slack_user, "team_id": TEAM},
        "team": {"id": TEAM},
        "trigger_id": fake.trigger(),
        "response_url": fake.url + "hooks/respond",
        "actions": [{"action_id": action, "value": f"{request_id}:{revision}"}],
    }


def updates_of(fake: FakeSlack, request_id: str) -> dict[str, str]:
    """The last rendering sent to each message of the request, by ts."""
    timestamps = set(SlackMessage.objects.filter(request_id=request_id).values_list("ts", flat=True))
    return {args["ts"]: str(args["blocks"]) for args in fake.called("chat.update") if args["ts"] in timestamps}


def test_a_linked_reviewer_approves_from_slack_and_every_message_shows_it(
    shown_in_slack, slack_daphne, fake, slack_worker
):
    request_id = shown_in_slack("slack-e2e-approve")
    posted = fake.called("chat.postMessage")
    assert sorted(args["channel"] for args in posted) == ["U_ALICE", "U_BOB"]
    assert "'action_id': 'approve'" in str(posted[0]["blocks"])

    status, seconds = post_to_daphne(slack_daphne.url, press_payload(fake, request_id, "approve"))
    assert status == 200 and seconds < 3, seconds  # Slack's 3 s

    eventually(lambda: Decision.objects.filter(request_id=request_id).exists(), "decided", log=slack_worker.log)
    assert ApprovalRequest.objects.get(pk=request_id).state in (State.APPROVED, State.EXECUTING, State.SUCCEEDED)
    assert Decision.objects.get(request_id=request_id).reviewer.username == "alice"
    shown = eventually(lambda: len(updates_of(fake, request_id)) == 2 and updates_of(fake, request_id), "both updated")
    assert all("approved by alice" in blocks and "'action_id': 'approve'" not in blocks for blocks in shown.values()), (
        shown,
        fake.calls,
    )
    eventually(lambda: [a["text"] for n, a in fake.calls if n == "respond"] == ["send_email approved."], "answered")


def test_a_rate_limited_update_comes_back_after_retry_after_from_the_worker(
    shown_in_slack, slack_daphne, fake, slack_worker
):
    request_id = shown_in_slack("slack-e2e-limited")
    fake.limit("chat.update", 2)  # the first update is refused with Retry-After: 2
    assert post_to_daphne(slack_daphne.url, press_payload(fake, request_id, "approve"))[0] == 200
    shown = eventually(lambda: len(updates_of(fake, request_id)) == 2 and updates_of(fake, request_id), "both updated")
    assert all("approved by alice" in blocks for blocks in shown.values())
    updates = [(status, at, args["ts"]) for method, status, at, args in fake.answered if method == "chat.update"]
    limited_status, limited_at, limited_ts = updates[0]
    assert limited_status == 429
    sent_at = next(at for status, at, ts in updates if status == 200 and ts == limited_ts)
    assert sent_at - limited_at >= 1.9  # the limited message waited out Retry-After; the other did not have to
    assert "Retry in 2s" in slack_worker.log()


def test_reject_from_slack_opens_the_modal_inline_and_rejects_with_its_feedback(
    shown_in_slack, slack_daphne, fake, slack_worker
):
    request_id = shown_in_slack("slack-e2e-reject")
    fake.slow("views.open", 1.0)  # Slack is slow to open the modal: the event loop is not held
    try:
        pressed = threading.Thread(
            target=post_to_daphne, args=(slack_daphne.url, press_payload(fake, request_id, "reject", "U_BOB"))
        )
        pressed.start()
        time.sleep(0.2)
        started = time.monotonic()
        with urllib.request.urlopen(slack_daphne.url + "/healthz", timeout=5):
            health_seconds = time.monotonic() - started
        pressed.join(10)
    finally:
        fake.slow("views.open", 0)
    assert health_seconds < 0.8, health_seconds
    (opened,) = fake.called("views.open")
    assert ApprovalRequest.objects.get(pk=request_id).state == State.PENDING_APPROVAL

    submission = {
        "type": "view_submission",
        "user": {"id": "U_BOB", "team_id": TEAM},
        "team": {"id": TEAM},
        "view": {
            "callback_id": opened["view"]["callback_id"],
            "private_metadata": opened["view"]["private_metadata"],
            "state": {"values": {"feedback": {"feedback": {"type": "plain_text_input", "value": "Not to Dana."}}}},
        },
    }
    assert post_to_daphne(slack_daphne.url, submission)[0] == 200
    eventually(
        lambda: ApprovalRequest.objects.get(pk=request_id).state == State.REJECTED, "rejected", log=slack_worker.log
    )
    decision = Decision.objects.get(request_id=request_id)
    assert (decision.reviewer.username, decision.feedback) == ("bob", "Not to Dana.")
    shown = eventually(lambda: len(updates_of(fake, request_id)) == 2 and updates_of(fake, request_id), "both updated")
    assert all("rejected by bob" in blocks for blocks in shown.values())


def test_a_decision_in_the_browser_updates_the_slack_messages(
    shown_in_slack, slack_browser, slack_daphne, fake, people, slack_worker
):
    request_id = shown_in_slack("slack-e2e-browser")
    carol = signed_in_page(slack_browser, slack_daphne.url, people["carol"], "carol-pw-123!")
    try:
        carol.locator("#live-status.is-live").wait_for()
        carol.clock.install()  # the approval is held for its undo window; the test moves the clock past it
        carol.reload()
        carol.locator("#live-status.is-live").wait_for()
        carol.locator(f"#row-{request_id}").click()
        carol.locator(f"#card-{request_id} .approve-form button[type=submit]").click()
        carol.locator("#undo-toast").wait_for()
        with carol.expect_response(lambda response: "/approve/" in response.url) as approved:
            carol.clock.run_for(5000)
        assert approved.value.json()["state"] == State.APPROVED
        assert Decision.objects.get(request_id=request_id).reviewer.username == "carol"
        shown = eventually(
            lambda: len(updates_of(fake, request_id)) == 2 and updates_of(fake, request_id),
            "both updated",
            log=slack_worker.log,
        )
        assert all(
            "approved by carol" in blocks and "'action_id': 'approve'" not in blocks for blocks in shown.values()
        )
    finally:
        carol.context.close()
