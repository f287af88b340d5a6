"""Several search systems judged on the same query set in one run: ``evaluate --compare``, several search
modes, several ``--search-url``/``--search-command``/``--run``. A result shown by two systems is judged
once, through the run's judgment cache. The summary's quality figures are the reference system's, its
counts and costs the whole run's (docs/external-search.md, "Side by side").
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from judge_runner.core.failures import StorageError
from judge_runner.core.interrupts import STOP
from judge_runner.core.models import DIMENSIONS, Query
from judge_runner.evaluation.context import RunContext
from judge_runner.evaluation.loop import RunLoop, pick_up_batches
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.evaluation.state import RunFinish, RunOutcome, RunState, begin_run, end_run, summary_on_crash
from judge_runner.judging.advice import recommended_focus
from judge_runner.measures.failed import failed_by_system
from judge_runner.measures.ir import METRIC_NAMES
from judge_runner.measures.paired import MIN_EFFECT, compare_values
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.write import RunWriter, SummaryInputs, build_summary

SCORE_COLUMNS = (*DIMENSIONS, "overall")


class SystemWriter:
    """The run writer seen by one system: every ``evaluation`` and ``error`` line gets ``system``, set in the
    line dict itself so the run's state records it too."""

    def __init__(self, writer: RunWriter, system: str):
        self.writer, self.system = writer, system
        self.run_id, self.path = writer.run_id, writer.path

    @property
    def failure(self) -> StorageError | None:
        """The run file's first write failure, None while every line was written."""
        return self.writer.failure

    def write(self, line: dict[str, Any]) -> None:
        if line.get("type") in ("evaluation", "error"):
            line["system"] = self.system
        self.writer.write(line)

    def close(self) -> None:
        self.writer.close()


REFERENCE_FIELDS = ("averageScores", "averageMetrics", "abstention", "topIssues", "recommendedFocus", "focusEvidence")
"""The summary fields a compare run gives for its reference system (every system's are in ``comparison.systems``)."""


class CompareSummaryWriter(SystemWriter):
    """Writes a compare run's summary: adds ``comparison``, sets :data:`REFERENCE_FIELDS` to the reference's
    and ``biasCorrected`` to every system's, in the summary dict itself."""

    def __init__(self, writer: RunWriter, systems: list[str], state: RunState, min_effect: float, options: EvaluateOptions | None = None):
        super().__init__(writer, "")
        self.systems, self.state, self.min_effect, self.options = systems, state, min_effect, options or EvaluateOptions()

    def write(self, line: dict[str, Any]) -> None:
        if line.get("type") == "summary":
            scored = self.state.scored if self.state.scored is not None else self.state.evaluations  # against the run's pooled qrels
            block = comparison_block(
                scored, self.state.errors, self.systems, self.min_effect, self.options.weights, self.options.search_limit
            )
            # a result shown by several systems is judged once: the later ones find its label in the judgment cache
            block["judgedOnce"] = {"labelsCached": sum(int(ev.get("labelsCached") or 0) for ev in scored)}
            reference = block["systems"][0]
            for name in REFERENCE_FIELDS:
                line[name] = reference[name]
            line["comparison"] = block
            # per system, never pooled: two systems' lines share query ids
            line["biasCorrected"] = bias_corrected(scored, self.systems, designs=self.state.label_designs, errors=self.state.errors)
            gate = line.get("qualityGate")
            if gate is not None:  # --min-overall gates the reference system, whose overall the summary shows
                overall = (reference["averageScores"] or {}).get("overall")
                # in place: the run's end status reads this same dict once the summary is written
                gate.update(system=reference["name"], overall=overall, passed=overall is not None and overall >= gate["minOverall"])
        self.writer.write(line)


def system_averages(
    evaluations: list[dict], errors: list[dict], name: str, weights: dict[str, float] | None = None, depth: int | None = None
) -> dict[str, Any]:
    """One system's averages, abstention, top issues and focus, averaged as the summary averages."""
    mine = [e for e in evaluations if e.get("system") == name]
    failed = [e for e in errors if e.get("system") == name]
    focus = recommended_focus(mine, weights, depth)
    summary = build_summary(
        "",
        mine,
        failed,
        len(mine) + len(failed),
        SummaryInputs(
            interrupted=False,
            budget_exhausted=False,
            cost_usd=None,
            usage={"inputTokens": 0, "outputTokens": 0, "calls": 0},
            duration_s=0.0,
            heuristic=False,
            recommended_focus=focus.text() if focus is not None else None,
            focus_evidence=focus.block() if focus is not None else None,
        ),
    )
    return {"name": name, "evaluated": len(mine), "failed": len(failed), **{k: summary[k] for k in REFERENCE_FIELDS}}


def per_query(evaluations: list[dict], name: str, column: str) -> dict[str, float]:
    """``{queryId: value}`` of a score or metric for one system (queries without it left out)."""
    out: dict[str, float] = {}
    for line in evaluations:
        if line.get("system") != name:
            continue
        source = line.get("scores") if column in SCORE_COLUMNS else line.get("metrics")
        value = (source or {}).get(column)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[line["queryId"]] = float(value)
    return out


def comparison_block(
    evaluations: list[dict],
    errors: list[dict],
    systems: list[str],
    min_effect: float = MIN_EFFECT,
    weights: dict[str, float] | None = None,
    depth: int | None = None,
) -> dict[str, Any]:
    """The summary's ``comparison``: ``reference``, ``minEffect``, ``systems`` and per later system and column
    the paired difference system - reference with failed queries at 0, its 95% bootstrap interval, n and
    verdict (:func:`judge_runner.measures.paired.compare_values`, :mod:`judge_runner.measures.failed`)."""
    reference = systems[0]
    failed = failed_by_system(evaluations, errors, systems)
    differences = []
    for name in systems[1:]:
        for column in (*SCORE_COLUMNS, *METRIC_NAMES):
            a, b = per_query(evaluations, reference, column), per_query(evaluations, name, column)
            result = compare_values(a, b, column, paired=True, min_effect=min_effect, failed=(failed[reference], failed[name]))
            differences.append(
                {
                    "system": name,
                    "against": reference,
                    "column": column,
                    "kind": "score" if column in SCORE_COLUMNS else "metric",
                    "mean": round(sum(b.values()) / len(b), 6) if b else None,
                    "referenceMean": round(sum(a.values()) / len(a), 6) if a else None,
                    "delta": result.delta,
                    "ci95": [result.low, result.high],
                    "n": result.n,
                    "verdict": result.verdict,
                    "failed": result.failed,
                }
            )
    return {
        "reference": reference,
        "minEffect": min_effect,
        "systems": [system_averages(evaluations, errors, name, weights, depth) for name in systems],
        "differences": differences,
    }


def describe_comparison(block: dict[str, Any]) -> list[str]:
    """A compare run's summary for people: each system's own figures, then every difference not within noise
    (always overall and nDCG@10)."""
    lines = [f"  systems (reference {block['reference']}), each over its own queries, all against the run's pooled qrels:"]
    for system in block["systems"]:
        scores, metrics = system["averageScores"] or {}, system["averageMetrics"] or {}
        overall, ndcg = scores.get("overall"), metrics.get("nDCG@10")
        a, evidence = system.get("abstention"), system.get("focusEvidence")
        abstained = f", abstained on {a['correct']}/{a['offTopic']} off-topic" if a and a.get("offTopic") else ""
        focus = ""
        if evidence:
            focus = (
                f", focus {evidence['dimension']} ({len(evidence['queryIds'])} queries)" if evidence.get("dimension") else ", nothing weak"
            )
        lines.append(
            f"    {system['name']}: {system['evaluated']} evaluated, {system['failed']} failed, overall "
            f"{'-' if overall is None else f'{overall:.3f}'}, nDCG@10 {'-' if ndcg is None else f'{ndcg:.3f}'}{abstained}{focus}"
        )
    for diff in block["differences"]:
        if diff["column"] in ("overall", "nDCG@10") or diff["verdict"] in ("regression", "improvement", "cannot tell"):
            lines.append(f"    {diff['system']} - {diff['against']} {diff['column']}: {difference_words(diff)}")
    return lines


def difference_words(diff: dict[str, Any]) -> str:
    """A difference in words: ``+0.138 [+0.043, +0.259] (improvement, n=9)``, with failed queries when they count."""

    def figure(delta: float | None, ci95: list, verdict: str, n: int) -> str:
        low, high = ci95
        interval = "" if low is None else f" [{low:+.3f}, {high:+.3f}]"
        return f"{'-' if delta is None else f'{delta:+.3f}'}{interval} ({verdict}, n={n})"

    failed = diff.get("failed")
    if not failed:
        return figure(diff["delta"], diff["ci95"], diff["verdict"], diff["n"])
    shown = figure(diff["delta"], diff["ci95"], failed["shownVerdict"], diff["n"])
    second = failed.get("secondFigure")
    if second is None:
        return f"{shown}; {failed['text']}"
    other = figure(second["delta"], second["ci95"], second["verdict"], second["n"])
    both = f"{shown} with failed queries {failed['shown']}, {other} {failed['second']}"
    return f"{failed['text']}: {both}" if not failed["holds"] else f"{both}; {failed['text']}"


@STOP.held()  # from the first line to the summary a signal only asks to stop (RunLoop checks)
def run_systems(
    queries: list[Query],
    systems: list[Any],
    writer: RunWriter,
    run_start: dict,
    ctx: RunContext,
    *,
    min_effect: float = MIN_EFFECT,
    prior: list[dict] | None = None,
    prior_batches: list[dict] | None = None,
) -> RunOutcome:
    """Judge ``queries`` on every system in order into one run file; returns the outcome. Never raises for a
    failed query (an ``error`` line naming the system). A stop stops the systems not yet started. ``prior``:
    the evaluation lines of the run being resumed (copied first; a system searches only the queries it has no
    line for); ``prior_batches``: its ``batch`` lines, as :func:`judge_runner.evaluation.loop.run_evaluation` takes them."""
    started = time.monotonic()
    done: dict[str, set[str]] = {}
    for line in prior or []:
        done.setdefault(str(line.get("system")), set()).add(str(line.get("queryId")))
    todo = {system.name: [q for q in queries if q.id not in done.get(system.name, set())] for system in systems}
    state = begin_run(writer, run_start, sum(map(len, todo.values())), prior, systems=len(systems))
    with summary_on_crash(state, writer):
        batching = pick_up_batches(ctx, writer, prior_batches)
        for system in systems:
            if state.stopped or ctx.stopped_by_budget:
                break
            if not todo[system.name]:
                continue
            tagged: Any = SystemWriter(writer, system.name)  # a RunWriter for the loop
            system_ctx = ctx.for_system(system.name, replace(ctx.options, search_mode=system.mode), prefix=len(systems) > 1)
            RunLoop(system_ctx, state, tagged).run(todo[system.name], system.search)
        final: Any = (
            CompareSummaryWriter(writer, [s.name for s in systems], state, min_effect, ctx.options)
            if len(systems) > 1
            else SystemWriter(writer, systems[0].name)
        )
        batch = batching.stats.as_dict() if batching is not None else None
        return end_run(
            state, final, ctx.options, RunFinish(started=started, budget=ctx.budget, heuristic=ctx.heuristic, batch=batch, carried=prior)
        )
