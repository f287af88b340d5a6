"""The documentation holds together: README.md stays short and keeps the project's test command, every
relative link in README.md, CHANGELOG.md and docs/*.md reaches a file (and a ``#fragment`` a heading of it), and every
docs page can be found from README.md or docs/README.md.

Links and headings are read with markdown-it-py, as a Markdown renderer sees them, so a link-like text
inside a code block or a code span is not a link. Anchors follow GitHub's rule for headings: the heading's
text, lower-cased, punctuation other than hyphens and underscores dropped, spaces turned into hyphens, and
``-1``, ``-2``, ... appended to repeats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DOCS_INDEX = DOCS / "README.md"
README_MAX_BYTES = 12 * 1024
# CI runs this line verbatim (.ci/run); it must stay on one line inside a fenced block of README.md.
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e '.[test]' && .venv/bin/python -m pytest -n 2"

MARKDOWN = MarkdownIt("commonmark").enable("table")


def pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


@cache
def tokens(path: Path) -> list[Token]:
    return MARKDOWN.parse(path.read_text(encoding="utf-8"))


def inline_children(path: Path):
    for token in tokens(path):
        if token.type == "inline":
            yield from token.children or ()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeats numbered as GitHub numbers them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    stream = tokens(path)
    for i, token in enumerate(stream):
        if token.type != "heading_open":
            continue
        text = "".join(child.content for child in stream[i + 1].children or () if child.type in ("text", "code_inline"))
        base = slug(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


@dataclass(frozen=True)
class Link:
    page: Path
    href: str

    @property
    def target(self) -> Path:
        """The file the link points at (the page itself for a bare ``#fragment``)."""
        path = unquote(urlsplit(self.href).path)
        if not path:
            return self.page
        base = ROOT if path.startswith("/") else self.page.parent
        return (base / path.lstrip("/")).resolve()

    @property
    def fragment(self) -> str:
        return unquote(urlsplit(self.href).fragment)

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}: {self.href}"


def relative_links(path: Path) -> list[Link]:
    """Links (and images) of a page that point inside the repository: no scheme, no host."""
    links = []
    for child in inline_children(path):
        href = child.attrGet("href") if child.type == "link_open" else child.attrGet("src") if child.type == "image" else None
        if href is None:
            continue
        parts = urlsplit(str(href))
        if not parts.scheme and not parts.netloc:
            links.append(Link(path, str(href)))
    return links


ALL_LINKS = [link for page in pages() for link in relative_links(page)]


@pytest.mark.parametrize("link", ALL_LINKS, ids=str)
def test_relative_link_resolves(link: Link):
    assert link.target.exists(), f"{link}: no such file {link.target}"
    if link.fragment:
        assert link.target.is_file() and link.target.suffix == ".md", f"{link}: a #fragment needs a Markdown file"
        assert link.fragment in anchors(link.target), f"{link}: no heading with the anchor #{link.fragment} in {link.target.name}"


def test_there_are_links_to_check():
    assert len(ALL_LINKS) > 20 and any(link.fragment for link in ALL_LINKS)


def test_every_docs_page_is_linked_from_readme_or_the_docs_index():
    linked = {link.target for page in (README, DOCS_INDEX) for link in relative_links(page)}
    unlinked = [str(page.relative_to(ROOT)) for page in DOCS.glob("*.md") if page.resolve() not in linked]
    assert not unlinked, f"not linked from README.md or docs/README.md: {unlinked}"


def test_readme_is_at_most_12_kb():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {README_MAX_BYTES})"


def test_readme_keeps_the_test_command_on_one_line_in_a_fenced_block():
    fenced = [line for token in tokens(README) if token.type == "fence" for line in token.content.splitlines()]
    assert TEST_COMMAND in fenced


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Exit codes", "exit-codes"),
        ("What a run will cost: `--dry-run`", "what-a-run-will-cost---dry-run"),
        ("Local model servers (Ollama, vLLM, llama.cpp)", "local-model-servers-ollama-vllm-llamacpp"),
        ("What the offline judge's figures mean", "what-the-offline-judges-figures-mean"),
        ("snake_case and Ünïcode", "snake_case-and-ünïcode"),
    ],
)
def test_anchors_follow_githubs_rule(tmp_path: Path, heading: str, anchor: str):
    page = tmp_path / "page.md"
    page.write_text(f"# {heading}\n\ntext\n\n## {heading}\n\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {anchor, f"{anchor}-1"}


def test_links_in_code_are_not_links(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("[real](a.md)\n\n`[span](b.md)`\n\n```\n[fenced](c.md)\n```\n\n    [indented](d.md)\n", encoding="utf-8")
    assert [link.href for link in relative_links(page)] == ["a.md"]
