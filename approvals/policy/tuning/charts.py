"""Server-rendered SVG charts for the metrics page: no JavaScript and no inline
style (colours come from classes in static/rules/rules.css), so the CSP holds.
Every label is escaped; the markup is built from numbers and escaped text only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

__all__ = ["Bar", "Series", "bar_chart", "line_chart"]

WIDTH, HEIGHT = 720, 220
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 12, 12, 28


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    css_class: str


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None
    shown: str


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _axis_labels(count: int, most: int = 8) -> list[tuple[int, str]]:
    """Which x labels to draw, and how each is anchored: about `most` of them, always the
    first and the last. The ends are anchored inward (start, end), so the last day's
    label ends at the plot's edge instead of being cut off by the viewBox ("12-0")."""
    if count <= 0:
        return []
    if count == 1:
        return [(0, "middle")]
    step = max(1, -(-count // most))  # ceiling: never more than `most` before the last
    shown = list(range(0, count, step))
    if shown[-1] != count - 1:
        if count - 1 - shown[-1] < step and len(shown) > 1:
            shown.pop()  # the last label is anchored at its end, so it reaches a step back: they would overlap
        shown.append(count - 1)
    return [(index, "start" if index == 0 else "end" if index == count - 1 else "middle") for index in shown]


def line_chart(labels: Sequence[str], series: Sequence[Series], *, title: str) -> SafeString:
    """A time series: one polyline per series over `labels` (e.g. days)."""
    top = _nice_max(max((max(s.values, default=0) for s in series), default=0))
    plot_w, plot_h = WIDTH - PAD_LEFT - PAD_RIGHT, HEIGHT - PAD_TOP - PAD_BOTTOM
    count = max(len(labels), 1)

    def x(index: int) -> float:
        return PAD_LEFT + (plot_w * index / (count - 1) if count > 1 else plot_w / 2)

    def y(value: float) -> float:
        return PAD_TOP + plot_h - plot_h * value / top

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for fraction in (0, 0.5, 1):
        gy = y(top * fraction)
        parts.append(f'<line class="grid" x1="{PAD_LEFT}" y1="{gy:.1f}" x2="{WIDTH - PAD_RIGHT}" y2="{gy:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{PAD_LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">{top * fraction:g}</text>'
        )
    for index, anchor in _axis_labels(len(labels)):
        parts.append(
            f'<text class="axis" x="{x(index):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">'
            f"{escape(labels[index])}</text>"
        )
    for s in series:
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values))
        parts.append(
            f'<polyline class="line {escape(s.css_class)}" points="{points}"><title>{escape(s.name)}</title></polyline>'
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="legend-item"><span class="swatch {escape(s.css_class)}"></span>{escape(s.name)}</span>'
        for s in series
    )
    return mark_safe(
        f'<figure class="chart-figure">{"".join(parts)}'
        f'<figcaption>{escape(title)} <span class="legend">{legend}</span></figcaption></figure>'
    )


def bar_chart(bars: Sequence[Bar], *, title: str, maximum: float | None = None, css_class: str = "bar-a") -> SafeString:
    """Horizontal bars, one per row; a None value draws no bar and shows "—"."""
    row_h, label_w, value_w = 22, 220, 70
    height = PAD_TOP + row_h * max(len(bars), 1) + 8
    top = maximum or _nice_max(max((b.value or 0 for b in bars), default=0))
    plot_w = WIDTH - label_w - value_w
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for index, bar in enumerate(bars):
        top_y = PAD_TOP + index * row_h
        label = bar.label if len(bar.label) <= 32 else bar.label[:31] + "…"
        parts.append(f'<text class="axis" x="{label_w - 8}" y="{top_y + 15}" text-anchor="end">{escape(label)}</text>')
        if bar.value is not None:
            w = plot_w * min(bar.value / top, 1) if top else 0
            parts.append(
                f'<rect class="bar {escape(css_class)}" x="{label_w}" y="{top_y + 3}" width="{w:.1f}" '
                f'height="{row_h - 6}"><title>{escape(bar.label)}: {escape(bar.shown)}</title></rect>'
            )
        parts.append(f'<text class="axis" x="{WIDTH - value_w + 6}" y="{top_y + 15}">{escape(bar.shown)}</text>')
    parts.append("</svg>")
    return mark_safe(f'<figure class="chart-figure">{"".join(parts)}<figcaption>{escape(title)}</figcaption></figure>')
