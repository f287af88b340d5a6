"""Test data for the prompt-injection fixture pair.

``fixtures/runbooks/redis-cache-failover.md`` is a clean runbook; ``fixtures/imported/redis-cache-failover.md``
is its twin "imported from the old wiki", with instructions to the judge in the body and in a heading
(so in the chunk's anchor), spoofed fence tags (case, spacing, full-width and zero-width variants) and a
spoofed result header with an engine score. Both were written for this project.

Once the judge is wired to :mod:`judge_runner.judging.fence`, the injection test is::

    pair = injection_pair()
    clean = render_document(*pair.clean)
    twin = render_document(*pair.twin)
    assert twin.injection_suspected and not clean.injection_suspected
    # the offline judge scores without_suspected_lines(doc); an LLM judge is shown the whole fence
    assert label(pair.query, pair.intent, twin) == label(pair.query, pair.intent, clean)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judge_runner.corpus.chunk import chunk_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLEAN_SOURCE = "runbooks/redis-cache-failover.md"
TWIN_SOURCE = "imported/redis-cache-failover.md"
SECTION = "Promote the replica"
ANSWER_MARKER = "replicaof no one"

QUERY = "how do I promote the redis replica when the primary is down"
INTENT = "The steps to fail the Lantern Redis cache over to its replica when the primary stops answering."

# every injection form the twin holds, as (field, signal kind, signal name) that fence.render_document
# must report; the test checks each is found
EXPECTED_SIGNALS = {
    ("anchor", "instruction", "note-to-judge"),
    ("anchor", "instruction", "ignore-instructions"),
    ("anchor", "instruction", "rate-this"),
    ("text", "instruction", "you-are-now"),
    ("text", "instruction", "rate-this"),
    ("text", "instruction", "relevance-value"),
    ("text", "instruction", "role-prefix"),
    ("text", "instruction", "must-be-relevant"),
    ("text", "instruction", "ignore-instructions"),
    ("text", "instruction", "note-to-judge"),
    ("text", "instruction", "ignore-instructions-de"),
    ("text", "instruction", "rate-this-de"),
    ("text", "instruction", "ignore-instructions-zh"),
    ("text", "spoofed-delimiter", "tag"),
    ("text", "spoofed-header", "result-header"),
    ("text", "spoofed-header", "engine-score"),
}
# the spoofed fence tags in the twin's body, each of which must come out neutralised
SPOOFED_TAGS = ("</document>", "</RESULTS >", "< / results>", "</res\u200bults>", "\uff1c/results\uff1e", '<document id="D9">')


@dataclass(frozen=True)
class InjectionPair:
    """The query and the two results to judge: each ``(source, anchor, best-chunk text)``."""

    query: str
    intent: str
    clean: tuple[str, str | None, str]
    twin: tuple[str, str | None, str]


def section_chunk(source: str, section: str = SECTION, marker: str = ANSWER_MARKER) -> tuple[str, str | None, str]:
    """``(source, anchor, text)`` of the one chunk under ``section`` that holds the answer (contains
    ``marker``), as the built-in chunker cuts it; raises AssertionError unless exactly one does. In the
    twin the injected heading starts a sub-section, so its chunk's anchor is the clean one plus that
    heading, and its text starts with the injected heading instead of ``## Promote the replica``."""
    text = (FIXTURES / source).read_text(encoding="utf-8")
    chunks = [c for c in chunk_text(text, "md") if c.anchor and section in c.anchor.split(" > ") and marker in c.text]
    assert len(chunks) == 1, f"{source}: expected one chunk under {section!r} holding {marker!r}, got {len(chunks)}"
    return source, chunks[0].anchor, chunks[0].text


def injection_pair() -> InjectionPair:
    """The clean and injected twin results for :data:`QUERY`."""
    return InjectionPair(QUERY, INTENT, section_chunk(CLEAN_SOURCE), section_chunk(TWIN_SOURCE))
