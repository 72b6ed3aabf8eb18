"""Issue 27 item 10: the queue lists 25 rows, and the rest are reachable: a window that
grows a page at a time (?shown=, "Show 25 more", or j past the last row in the browser),
with the live count and sync reading the same window, in a constant number of queries."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.web import queue_queries

from .queue_story import QUEUE, SYNC, card_ids

PAGE = queue_queries.QUEUE_LIMIT


def queries_for(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_rows_past_the_first_25_are_reachable_a_page_at_a_time(client, people, submit):
    pending = [submit("send_email") for _ in range(PAGE * 2 + 5)]
    client.force_login(people["alice"])

    first = client.get(QUEUE)
    assert len(card_ids(first)) == PAGE
    body = first.content.decode()
    assert '<span id="shown-note">Showing the first <span id="shown-limit">25</span>.' in body
    assert f'href="?shown={PAGE * 2}" id="show-more"' in body

    assert len(card_ids(client.get(f"{QUEUE}?shown={PAGE * 2}"))) == PAGE * 2
    everything = client.get(f"{QUEUE}?shown={PAGE * 3}")
    assert set(card_ids(everything)) == {str(r.pk) for r in pending}
    assert '<span id="shown-note" hidden>' in everything.content.decode()

    sync = client.get(f"{SYNC}?shown={PAGE * 2}").json()
    assert (sync["count"], sync["more"], sync["shown"], len(sync["cards"])) == (PAGE * 2 + 5, True, PAGE * 2, PAGE * 2)
    assert client.get(f"{SYNC}?shown={PAGE * 3}").json()["more"] is False


def test_the_window_is_whole_pages_and_bounded(client, people, submit):
    submit("send_email")
    client.force_login(people["alice"])
    for asked, shown in (
        ("", PAGE),
        ("nope", PAGE),
        ("-4", PAGE),
        ("26", PAGE * 2),
        ("99999", queue_queries.QUEUE_WINDOW),
    ):
        assert client.get(f"{SYNC}?shown={asked}").json()["shown"] == shown, asked


def test_a_wider_window_costs_the_same_number_of_queries(client, people, submit):
    for _ in range(PAGE * 2 + 5):
        submit("send_email")
    client.force_login(people["alice"])
    client.get(QUEUE)  # warm the session and the permission caches
    # A window the first risk level fills costs what the first page costs...
    assert queries_for(client, f"{QUEUE}?shown={PAGE * 2}") == queries_for(client, QUEUE)
    assert queries_for(client, f"{SYNC}?shown={PAGE * 2}") == queries_for(client, SYNC)
    # ...and one past the queue's end reads each remaining level once (queue_page's
    # per-level index reads), however wide it is.
    wide = {queries_for(client, f"{QUEUE}?shown={n}") for n in (PAGE * 3, PAGE * 10, queue_queries.QUEUE_WINDOW)}
    assert len(wide) == 1 and wide.pop() <= queries_for(client, QUEUE) + len(queue_queries._QUEUE_LEVELS)
