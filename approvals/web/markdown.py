"""Render untrusted Markdown (an agent's plan) to HTML that is safe to show reviewers.

Two layers, so one mistake is not enough: markdown-it-py's `js-default` preset
(raw HTML off, `javascript:`/`vbscript:`/`file:` and most `data:` links refused)
renders, then nh3 (the ammonia sanitizer) keeps only an allow-list of tags,
attributes and URL schemes. The page's Content-Security-Policy is the third layer.
"""

from __future__ import annotations

from functools import cache

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

__all__ = ["render_markdown"]

# Block and inline elements a plan needs; no forms, media, frames or styles.
ALLOWED_TAGS: frozenset[str] = frozenset(
    {
        "a",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "strong",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
ALLOWED_ATTRIBUTES: dict[str, set[str]] = {"a": {"href", "title"}, "ol": {"start"}, "td": {"align"}, "th": {"align"}}
ALLOWED_URL_SCHEMES: frozenset[str] = frozenset({"http", "https", "mailto"})


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("js-default").enable("table").enable("strikethrough")


def render_markdown(text: str) -> SafeString:
    """Sanitized HTML for `text`. Links get rel="noopener noreferrer nofollow"."""
    html = _parser().render(text or "")
    cleaned = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=set(ALLOWED_URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(cleaned)  # noqa: S308  (sanitized by nh3 just above)
