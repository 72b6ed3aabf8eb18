"""Shared browser fixtures: Debian's chromium driven by Playwright against the real
daphne server (`daphne_server`, on the test database).

Use them from any test under tests/browser/:

    @pytest.mark.slow
    @pytest.mark.django_db(transaction=True)
    def test_something(logged_in_page, people):
        page = logged_in_page("alice", "alice-pw-123!")   # signed in through the real form
        page.goto(page.server_url + "/history/")

`browser` is one chromium per module; `new_context()` opens an isolated
context (its own cookies) that is closed after the test; `logged_in_page(user,
password)` signs in through the login form and returns the page, already on the
queue; `artifacts_dir` is test-artifacts/ (gitignored) for screenshots. Data the
server must see has to be committed: mark tests `django_db(transaction=True)`.
Changes made in the test process reach the server's sockets only through Redis
(REDIS_URL); live-update tests also take `require_redis`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import pytest

from agents.services import issue_token
from tests.fixtures.services import missing_service

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"
VIEWPORT = {"width": 1440, "height": 900}


@pytest.fixture(scope="module")
def playwright_instance(daphne_server) -> Iterator:
    # Module scope, not session: Playwright's sync API runs an event loop in this thread
    # for as long as it lives, and every later test that calls async_to_sync or
    # asyncio.run would fail; closing it with each browser module keeps them working.
    # The test database and daphne come first: once Playwright's loop runs in this
    # thread, Django refuses synchronous ORM work such as creating the test database.
    if not os.access(CHROMIUM, os.X_OK):
        missing_service(f"needs Debian chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_service("needs the playwright package (pip install -r requirements-dev.txt)")
    manager = sync_playwright()
    playwright = manager.start()
    # Playwright's sync API keeps an event loop in this thread, which makes Django refuse
    # ORM calls from test bodies and fixtures. Browser tests touch the ORM only between
    # browser steps, never concurrently with them, so the check is lifted while Playwright
    # runs (tests.live.child_environment keeps it out of server processes).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield playwright
    manager.__exit__(None, None, None)
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def browser(playwright_instance, daphne_server) -> Iterator:
    """One headless chromium per test module (never a downloaded browser build)."""
    chromium = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


@pytest.fixture
def new_context(browser, daphne_server) -> Iterator[Callable]:
    """Factory for isolated browser contexts (their own cookies), closed after the test."""
    contexts = []

    def _new(**options):
        context = browser.new_context(**{"base_url": daphne_server.url, "viewport": VIEWPORT, **options})
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context

    yield _new
    for context in contexts:
        context.close()


def _server_can_check(user, password: str) -> str:
    """Store `password` in a form the daphne process can verify, and return the username.

    The test process hashes with MD5 for speed (tests/conftest.py), which the server's
    PASSWORD_HASHERS do not include; PBKDF2 with few iterations is fast and verifiable.
    """
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    model = get_user_model()
    found = user if isinstance(user, model) else model.objects.get(username=user)
    hasher = PBKDF2PasswordHasher()
    model.objects.filter(pk=found.pk).update(password=hasher.encode(password, hasher.salt(), iterations=1000))
    return found.get_username()


def wait_for_address(page, address: str) -> None:
    """Wait until the page is at `address` (absolute, or a path with its query), whatever its
    fragment: the queue writes the selected row into the fragment (#selected=<id>) as soon as its
    script runs, which can be before Playwright looks, and a URL glob would then never match."""
    wanted = urljoin(page.url, address)
    page.wait_for_url(lambda url: urldefrag(url).url == wanted)


def signed_in_page(new_context, daphne_server, username: str, password: str, **options):
    """A new browser context (`options`: viewport, is_mobile, ...) signed in as `username`
    through the real sign-in form; returns its page on the queue."""
    _server_can_check(username, password)
    page = new_context(**options).new_page()
    page.goto("/login/")
    page.fill("#id_login", username)
    page.fill("#id_password", password)
    page.click("form button[type=submit]")
    wait_for_address(page, daphne_server.url + "/")
    return page


@pytest.fixture
def logged_in_page(new_context, daphne_server) -> Callable:
    """`logged_in_page(user_or_username, password)`: a new context signed in through the
    real login form (the user's password is set to `password` first); returns its page on the
    user's landing page (the queue for reviewers, /rules/ for risk admins, /audit/ for auditors), with `page.server_url` and
    `page.dialogs` (every JavaScript dialog that opened, dismissed)."""

    def _login(user, password: str):
        username = _server_can_check(user, password)
        page = new_context().new_page()
        page.server_url = daphne_server.url
        page.dialogs = []

        def on_dialog(dialog):
            page.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto("/login/")
        page.fill("#id_login", username)
        page.fill("#id_password", password)
        page.click("form button[type=submit]")
        # Each role lands on its own page (controlplane.navigation.landing_url); tests start there.
        from django.contrib.auth import get_user_model

        from controlplane.navigation import landing_url

        wait_for_address(page, daphne_server.url + landing_url(get_user_model().objects.get(username=username)))
        return page

    return _login


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def select_card(page, request_id) -> None:
    """Pick a request in the queue's list: its card opens in the pane beside it (the
    triage layout shows one card at a time; keys act only on the selected one)."""
    page.locator(f"#row-{request_id}").click()
    page.locator(f"#row-{request_id}[aria-selected=true]").wait_for()
    page.locator(f"#card-{request_id}.is-selected").wait_for()


def confirm_decision(page) -> None:
    """Say yes to the explicit confirm a high or critical approval asks for; the
    approval is then held for the undo window and sent when it closes."""
    page.locator("#confirm-decision[open]").wait_for()
    page.locator("#confirm-yes").click()


@pytest.fixture
def agent_token(agent) -> str:
    """mail-bot's bearer token, for a browser story's agent side."""
    return issue_token(agent, label="browser test").secret
