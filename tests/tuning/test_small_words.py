"""Small things a reader trips on: "submitted 0 minutes ago" (now "just now") and the
metrics chart's last day cut to "12-0" by the edge of the drawing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from django.template import Context, Template
from hypothesis import given
from hypothesis import strategies as st

from approvals.policy.tuning.charts import HEIGHT, PAD_LEFT, PAD_RIGHT, WIDTH, Series, line_chart
from approvals.web.templatetags.timewords import ago

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_under_a_minute_reads_just_now():
    assert ago(NOON - timedelta(seconds=59), NOON) == "just now"
    assert ago(NOON, NOON) == "just now"
    assert ago(NOON + timedelta(seconds=2), NOON) == "just now"  # a clock a little behind the writer's


def test_older_reads_how_long_ago():
    assert ago(NOON - timedelta(minutes=3), NOON) == "3\xa0minutes ago"
    assert ago(NOON - timedelta(hours=2, minutes=5), NOON) == "2\xa0hours, 5\xa0minutes ago"
    assert ago(None) == ""


def test_every_page_may_say_ago_without_loading_anything():
    rendered = Template("submitted {{ when|ago }}").render(Context({"when": datetime.now(UTC)}))
    assert rendered == "submitted just now"


def axis_labels(svg: str) -> list[tuple[float, str, str]]:
    return [
        (float(x), anchor, text)
        for x, anchor, text in re.findall(
            rf'<text class="axis" x="([\d.]+)" y="{HEIGHT - 8}" text-anchor="(\w+)">([^<]*)</text>', svg
        )
    ]


def test_the_last_days_label_ends_inside_the_chart():
    days = [f"2026-11-{day:02d}" for day in range(2, 31)] + ["2026-12-01"]
    labels = axis_labels(line_chart(days, [Series("volume", [1] * len(days), "s-volume")], title="Volume"))
    assert labels[0] == (PAD_LEFT, "start", "2026-11-02")
    assert labels[-1] == (WIDTH - PAD_RIGHT, "end", "2026-12-01")


@given(st.integers(min_value=1, max_value=400))
def test_any_number_of_days_shows_first_and_last_and_at_most_about_nine_labels(count):
    days = [f"d{index}" for index in range(count)]
    labels = axis_labels(line_chart(days, [Series("v", [0] * count, "s")], title="t"))
    texts = [text for _, _, text in labels]
    assert texts[0] == "d0" and texts[-1] == f"d{count - 1}"
    assert len(texts) == len(set(texts)) <= 10
    xs = [x for x, _, _ in labels]
    assert xs == sorted(xs) and all(PAD_LEFT <= x <= WIDTH - PAD_RIGHT for x in xs)
    if len(xs) > 2:  # the end-anchored last label needs a full gap before it, not half of one
        assert xs[-1] - xs[-2] >= xs[1] - xs[0] - 0.2


def test_a_month_of_days_does_not_crowd_its_last_two_labels():
    days = [f"11-{day:02d}" for day in range(1, 31)] + ["12-01"]
    texts = [text for _, _, text in axis_labels(line_chart(days, [Series("v", [0] * 31, "s")], title="t"))]
    assert texts[-2:] == ["11-25", "12-01"]
