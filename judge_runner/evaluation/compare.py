"""Several search systems judged on the same query set in one run (issue 12): ``evaluate --compare
a.toml,b.toml``, ``--search-mode fts,vector,hybrid``, several ``--search-url``/``--search-command``/``--run``.

- :func:`run_systems` is the run loop of such a run: one ``run_start``, each system's queries through
  :class:`judge_runner.evaluation.loop.RunLoop` with its lines tagged ``system`` (:class:`SystemWriter`), one
  summary. A run of a single external system goes through it too (its lines carry the system's name).
- a result shown by two systems is judged once: every system's labels go through the run's judgment
  cache (``judging/cache.py``), keyed by the exact text shown, so the second system finds them there.
- :func:`comparison_block`: the summary's ``comparison``: per system its averages, and per dimension
  and metric the paired difference of every system to the first (the reference) with its 95%
  bootstrap interval and verdict, computed by :func:`judge_runner.measures.paired.compare_values` (the same
  bootstrap and minimum-effect rule as ``trend``), each system's failed queries counted by the rule of
  :mod:`judge_runner.measures.failed` (at 0, and "cannot tell" when they could change the verdict).

In a compare run the summary's figures about search quality (``averageScores``, ``averageMetrics``,
``abstention``, ``topIssues``, ``recommendedFocus``, ``focusEvidence``) are the reference system's, so a
reader that knows nothing of systems sees one coherent set of figures; every system's own are in
``comparison.systems``. The counts and costs of the run (``evaluated``, ``failed``, ``totalQueries``, labels,
usage, cost) are the whole run's, every system together (docs/external-search.md, "Side by side").
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from judge_runner.core.interrupts import STOP
from judge_runner.core.models import DIMENSIONS, Query
from judge_runner.evaluation.context import RunContext
from judge_runner.evaluation.loop import RunLoop
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.evaluation.state import RunOutcome, begin_run, end_run
from judge_runner.judging.advice import recommended_focus
from judge_runner.measures.failed import failed_by_system
from judge_runner.measures.ir import METRIC_NAMES
from judge_runner.measures.paired import MIN_EFFECT, compare_values
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.write import build_summary

SCORE_COLUMNS = (*DIMENSIONS, "overall")


class SystemWriter:
    """The run writer seen by one system's queries: every ``evaluation`` and ``error`` line gets
    ``system`` (set in the line dict itself, so the run's state records it too)."""

    def __init__(self, writer: Any, system: str):
        self.writer, self.system = writer, system
        self.run_id, self.path = writer.run_id, writer.path

    @property
    def failure(self) -> Any:
        """The run file's first write failure (``RunWriter.failure``), None while every line was written."""
        return getattr(self.writer, "failure", None)

    def write(self, line: dict[str, Any]) -> None:
        """Tag and write one line."""
        if line.get("type") in ("evaluation", "error"):
            line["system"] = self.system
        self.writer.write(line)

    def close(self) -> None:
        """Close the run file."""
        self.writer.close()


REFERENCE_FIELDS = ("averageScores", "averageMetrics", "abstention", "topIssues", "recommendedFocus", "focusEvidence")
"""The summary fields a compare run gives for its reference system (every system's are in ``comparison.systems``)."""


class CompareSummaryWriter(SystemWriter):
    """The writer that writes a compare run's summary: adds ``comparison`` (:func:`comparison_block`),
    sets :data:`REFERENCE_FIELDS` to the reference system's and ``biasCorrected`` to every system's corrected
    figures, the reference's on top (:func:`judge_runner.runs.corrected.bias_corrected` with the systems in
    order), in the summary dict itself (so the run's outcome shows them too)."""

    def __init__(self, writer: Any, systems: list[str], state: Any, min_effect: float, options: EvaluateOptions | None = None):
        super().__init__(writer, "")
        self.systems, self.state, self.min_effect, self.options = systems, state, min_effect, options or EvaluateOptions()

    def write(self, line: dict[str, Any]) -> None:
        """Write the line; a summary first gains the comparison."""
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
            # per system, never pooled: two systems' lines share query ids (issue 29)
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
    """One system's ``{name, evaluated, failed, averageScores, averageMetrics, abstention, topIssues,
    recommendedFocus, focusEvidence}`` (averaged as the summary averages:
    :func:`judge_runner.runs.write.build_summary`; the focus of its own lines,
    :func:`judge_runner.judging.advice.recommended_focus` with the run's ``weights`` and search limit ``depth``)."""
    mine = [e for e in evaluations if e.get("system") == name]
    failed = [e for e in errors if e.get("system") == name]
    focus = recommended_focus(mine, weights, depth)
    summary = build_summary(
        "",
        mine,
        failed,
        len(mine) + len(failed),
        interrupted=False,
        budget_exhausted=False,
        cost_usd=None,
        usage={"inputTokens": 0, "outputTokens": 0, "calls": 0},
        duration_s=0.0,
        heuristic=False,
        recommended_focus=focus.text() if focus is not None else None,
        focus_evidence=focus.block() if focus is not None else None,
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
    """The summary's ``comparison``: ``reference`` (the first system), ``minEffect``, ``systems`` (each
    one's figures, :func:`system_averages`) and ``differences``: for each later system and each column (the four dimensions,
    ``overall``, then the metrics by ir-measures name) the means (each over the queries the system answered),
    the paired difference system - reference with either's failed queries at 0, its 95% bootstrap interval,
    n, the verdict ("cannot tell" when the failed queries could change it) and ``failed`` (null when neither
    failed a query; :mod:`judge_runner.measures.failed`)."""
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
    """A compare run's summary for people: per system its own overall, nDCG@10, abstention and focus
    dimension, then every difference to the reference that is not within noise (or all of overall and
    nDCG@10), with what the systems' failed queries do to it."""
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
    """A difference in words: ``+0.138 [+0.043, +0.259] (improvement, n=9)``; with failed queries that count, the
    figure with them at 0 and the second figure, after "cannot tell: B failed 5 of 14 queries" when they differ."""

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
    writer: Any,
    run_start: dict,
    ctx: RunContext,
    *,
    min_effect: float = MIN_EFFECT,
) -> RunOutcome:
    """Judge ``queries`` on every system of ``systems`` (:class:`judge_runner.search.systems.System`)
    in order, into one run file, as ``ctx`` says (each system with its own search mode); returns the run's
    outcome. Never raises for a failed query (an ``error`` line with ``stage: search`` or ``judge`` and the
    system's name). A stop (Ctrl+C, budget, refused key) stops the systems not yet started too. Two or more
    systems add the summary's ``comparison`` block. ``ctx.cache`` is the judgment cache shared by every
    system, so a result shown by two systems is judged once (with ``--no-cache``, once per system)."""
    started = time.monotonic()
    state = begin_run(writer, run_start, len(queries) * len(systems), systems=len(systems))
    for system in systems:
        if state.stopped or ctx.stopped_by_budget:
            break
        tagged: Any = SystemWriter(writer, system.name)  # a RunWriter for the loop
        system_ctx = ctx.for_system(system.name, replace(ctx.options, search_mode=system.mode), prefix=len(systems) > 1)
        RunLoop(system_ctx, state, tagged).run(queries, system.search)
    final: Any = (
        CompareSummaryWriter(writer, [s.name for s in systems], state, min_effect, ctx.options)
        if len(systems) > 1
        else SystemWriter(writer, systems[0].name)
    )
    batching = getattr(ctx.judge, "batching", None)
    batch = batching.stats.as_dict() if batching is not None else None
    return end_run(state, final, ctx.options, started=started, budget=ctx.budget, heuristic=ctx.heuristic, batch=batch)
