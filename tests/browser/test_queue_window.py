"""Issue 27 item 10 in a real browser (Debian chromium, real daphne): the queue lists 25
rows of 30, says so with the live count, and j past the 25th row brings the next page in
place and goes on into it; k goes back; an arrival keeps the window."""

from __future__ import annotations

import pytest

from approvals.web import queue_queries

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PAGE = queue_queries.QUEUE_LIMIT


def row_ids(page) -> list[str]:
    return page.locator("#queue-list .queue-row").evaluate_all("(rows) => rows.map((row) => row.dataset.id)")


def test_j_past_the_last_row_brings_the_next_page_and_goes_on(require_redis, logged_in_page, people, submit):
    for _ in range(PAGE + 5):
        submit("send_email")
    page = logged_in_page("alice", "alice-pw-123!")
    page.locator("#live-status.is-live").wait_for()
    assert page.locator("#queue-count").inner_text() == str(PAGE + 5)
    assert len(row_ids(page)) == PAGE
    assert (
        page.locator("#shown-note").is_visible() and "Showing the first 25." in page.locator("#shown-note").inner_text()
    )

    first = row_ids(page)[0]
    page.locator(f"#row-{first}").click()
    for _ in range(PAGE - 1):
        page.keyboard.press("j")
    last = row_ids(page)[PAGE - 1]
    page.locator(f"#row-{last}[aria-selected=true]").wait_for()

    page.keyboard.press("j")  # past the last row: the next page joins the list
    page.locator("#queue-list .queue-row").nth(PAGE + 4).wait_for()  # (the page's CSP forbids eval)
    after = row_ids(page)[PAGE]
    page.locator(f"#row-{after}[aria-selected=true]").wait_for()
    page.locator(f"#card-{after}.is-selected").wait_for()
    assert "shown=50" in page.url and page.locator("#shown-note").is_hidden()
    page.keyboard.press("k")
    page.locator(f"#row-{last}[aria-selected=true]").wait_for()

    newcomer = submit("send_email")  # live: the count follows, the window stays 50 wide
    page.locator("#queue-count", has_text=str(PAGE + 6)).wait_for()
    page.locator(f"#row-{newcomer.pk}").wait_for()
    assert len(row_ids(page)) == PAGE + 6


def test_show_more_link_works_without_the_keyboard(require_redis, logged_in_page, people, submit):
    for _ in range(PAGE + 2):
        submit("send_email")
    page = logged_in_page("alice", "alice-pw-123!")
    page.locator("#live-status.is-live").wait_for()
    page.locator("#show-more").click()
    page.locator("#queue-list .queue-row").nth(PAGE + 1).wait_for()
    page.reload()  # the window is in the URL
    page.locator("#live-status.is-live").wait_for()
    assert len(row_ids(page)) == PAGE + 2
