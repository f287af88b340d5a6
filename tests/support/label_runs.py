"""A small run file for the labelling tests, written with the run file's own models: 4 queries, 4 results each,
with distinctive judge reasons, engine scores and a system name that must never reach the labelling page, and
one document holding a script tag and Markdown."""

from __future__ import annotations

import json
from pathlib import Path

from judge_runner.runs.lines import EvaluationLine, ResultLabel, RunStartLine, Scores, SummaryLine

HOSTILE = (
    "<script>window.__pwned = 1</script> **bold claim** and [a link](http://example.invalid/x) "
    '<img src=x onerror="window.__pwned=2"> # Not a heading\n\n- a list item'
)
SYSTEM = "SYSTEM-ALPHA-7"
QUERIES = {f"q{q}": (f"how do we rotate key {q}", f"Find the rotation steps for key {q}.") for q in range(1, 5)}


def score_of(q: int, r: int) -> float:
    """A distinctive engine score: it must never appear on the page."""
    return round(0.987654 - 0.013579 * (4 * q + r), 6)


def reason_of(q: int, r: int) -> str:
    return f"JUDGE-REASON-{q}-{r} says this is grade-worthy"


def write_run(folder: Path, name: str = "20261201T090000Z") -> Path:
    """Write the run file; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        RunStartLine(runId=name, timestamp="2026-12-01T09:00:00.000Z", formatVersion=2, config={}).line(),
    ]
    for q, (qid, (text, intent)) in enumerate(QUERIES.items(), start=1):
        results = []
        for r in range(4):
            shown = HOSTILE if (q, r) == (2, 1) else f"Rotation runbook part {r} for key {q}: step one, step two."
            results.append(
                ResultLabel(
                    rank=r + 1,
                    source=f"runbooks/key-{q}-part {r}.md",
                    anchor='<img src=x onerror="window.__pwned=3"> Part **one**' if (q, r) == (2, 1) else f"Key {q} > Part {r}",
                    score=score_of(q, r),
                    relevance=(q + r) % 4,
                    relevant=(q + r) % 4 >= 2,
                    reason=reason_of(q, r),
                    trialLabels=[(q + r) % 4],
                    snippet=shown[:60],
                    shownText=shown,
                    shownChars=len(shown),
                )
            )
        lines.append(
            EvaluationLine(
                runId=name,
                timestamp="2026-12-01T09:00:01.000Z",
                queryId=qid,
                query=text,
                queryIntent=intent,
                queryType="natural-language",
                searchMode="hybrid",
                resultCount=4,
                scores=Scores(relevance=0.5, ranking=0.5, coverage=0.5, snippetQuality=0.5, overall=0.5),
                results=results,
                metrics={"nDCG@10": 0.2 * q, "R@10": None, "RR(rel=2)": 0.5},
                system=SYSTEM,
            ).line()
        )
    lines.append(SummaryLine(runId=name, timestamp="2026-12-01T09:00:02.000Z", totalQueries=4, evaluated=4).line())
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def secrets_of_the_judge() -> list[str]:
    """Strings of the run file that must never reach the page: reasons, engine scores, the system."""
    out = [SYSTEM, "JUDGE-REASON"]
    out += [repr(score_of(q, r)) for q in range(1, 5) for r in range(4)]
    return out
