"""Plans are untrusted Markdown: what reaches the page never carries script."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from approvals.web.markdown import render_markdown

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="javascript:alert(1)">x</a>',
    "<svg onload=alert(1)>",
    "<iframe src=https://evil.example></iframe>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "![img](javascript:alert(1))",
    "<style>body{display:none}</style>",
]

SAFE_TAGS = {
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


class _Elements(HTMLParser):
    """The elements and attributes a browser would build (escaped text is not one)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def assert_inert(html: str) -> None:
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.found:
        assert tag in SAFE_TAGS, (tag, html)
        assert not any(name.startswith("on") or name == "style" for name in attrs), (attrs, html)
        for name in ("href", "src"):
            if attrs.get(name):
                assert urlsplit(attrs[name].strip()).scheme.lower() in {"", "http", "https", "mailto"}, (attrs, html)


def test_markdown_renders_the_structure_a_plan_needs():
    html = render_markdown(
        "# Plan\n\n1. **Snapshot**\n2. `migrate`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n[docs](https://example.org)"
    )
    assert "<h1>Plan</h1>" in html
    assert "<strong>Snapshot</strong>" in html and "<code>migrate</code>" in html
    assert "<table>" in html and "<td>2</td>" in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">docs</a>' in html


def test_each_known_attack_is_inert():
    for attack in ATTACKS:
        html = render_markdown(f"Intro\n\n{attack}\n\nOutro")
        assert_inert(html)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(ATTACKS), st.text(max_size=40), st.sampled_from(["\n\n", "# ", "* ", "> ", "`"])),
        max_size=12,
    )
)
def test_no_mix_of_markdown_and_attacks_yields_script(parts):
    html = render_markdown("".join(parts))
    assert_inert(html)
