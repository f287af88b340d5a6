"""The public Python API: the functions the command line itself ends in, for a team's own code.

    import judge_runner.api as jr

    def my_search(query: str, k: int) -> list[dict]:
        return [{"id": "guides/backup.md", "text": "...", "score": 1.0}]

    result = jr.evaluate("queries.json", search=my_search, corpus="docs/", provider="offline")
    print(result.status, result.overall, result.path)

Each function takes the settings as keyword arguments named like the command line's flags
(``provider="offline"``, ``search_limit=5``, ``max_budget_usd=2``), over the config file and the
``JUDGE_RUNNER_*`` variables, exactly as a flag is (or a built :class:`~judge_runner.config.Settings` as
``settings=``), and returns a frozen dataclass. Failures raise
:class:`~judge_runner.core.failures.JudgeRunnerError` (``exit_code`` says which: 2 bad input, 3 a run that
could not finish; the command line turns it into its exit status). Nothing is printed but warnings on
stderr unless a :class:`~judge_runner.core.printer.Printer` is given. Details: docs/python-api.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge_runner.analysis.pr_summary import github_summary
from judge_runner.analysis.trend import Trend, build_trend
from judge_runner.app.history import ci_report_url, reading_cache
from judge_runner.app.inputs import load, query_set_problems
from judge_runner.app.jobs import evaluate_job, generate_job, main_job
from judge_runner.app.rejudge import rejudge_job
from judge_runner.config import ConfigError, Settings, derive
from judge_runner.core.failures import UsageError
from judge_runner.core.models import Query, QuerySet
from judge_runner.core.printer import Printer, silent
from judge_runner.evaluation.state import RunOutcome
from judge_runner.measures.ir import NDCG10_NAME
from judge_runner.measures.paired import MIN_EFFECT
from judge_runner.runs.lines import EvaluationLine, SummaryLine
from judge_runner.search.python_search import SearchFunction
from judge_runner.search.systems import SystemsSpec

__all__ = [
    "GenerateResult",
    "RunResult",
    "TrendResult",
    "evaluate",
    "generate",
    "generate_and_evaluate",
    "make_settings",
    "pr_summary",
    "rejudge",
    "trend",
]


@dataclass(frozen=True)
class RunResult:
    """A phase-two run: its id and file, how it ended (``status``: ok, gate_failed, incomplete,
    config_error; ``exit_code``: what the command line exits with), its summary line and evaluation lines
    as the run file holds them (:mod:`judge_runner.runs.lines`)."""

    run_id: str
    path: Path
    status: str
    exit_code: int
    summary: SummaryLine
    evaluations: tuple[EvaluationLine, ...]

    @property
    def overall(self) -> float | None:
        """Mean overall score (0-1) over the judged on-topic queries; None when none was."""
        return (self.summary.averageScores or {}).get("overall")

    @property
    def ndcg10(self) -> float | None:
        """Mean nDCG@10 (ir-measures) over the judged on-topic queries; None when none was."""
        return (self.summary.averageMetrics or {}).get(NDCG10_NAME)

    @property
    def cost_usd(self) -> float | None:
        """What the run's judge calls cost, in USD (None when a price is unknown)."""
        return self.summary.costUsd


@dataclass(frozen=True)
class GenerateResult:
    """Phase one: the query-set file written, its queries, the queries dropped (each ``{id, query,
    reason}``) and what writing and checking them cost (USD; None when a price is unknown)."""

    path: Path
    queries: tuple[Query, ...]
    dropped: tuple[dict[str, Any], ...]
    cost_usd: float | None


@dataclass(frozen=True)
class TrendResult:
    """The runs of a results folder as ``trend`` shows them: per judge its ``groups`` of rows, the
    pinned ``baseline``, the ``latest`` run's verdict, the ``judge_changes`` bridged by re-judged runs and
    the reader's ``warnings`` (:class:`judge_runner.analysis.trend.Trend`)."""

    groups: tuple[dict[str, Any], ...]
    baseline: str | None
    latest: dict[str, Any] | None
    judge_changes: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...]
    trend: Trend

    @property
    def regression(self) -> bool:
        """Whether the latest run regressed (or failed): what ``trend --fail-on-regression`` exits 1 for."""
        return bool(self.latest and (self.latest.get("regression") or self.latest.get("failed")))


def make_settings(settings: Settings | None = None, **options: Any) -> Settings:
    """Settings as the command line makes them: the config file, then ``JUDGE_RUNNER_*`` variables, then
    ``options`` (flag names with underscores; None means not given); or ``settings`` with ``options``
    applied. Raises UsageError for a value no setting accepts."""
    given = {k: v for k, v in options.items() if v is not None}
    if settings is None:
        return load(given, lambda name: f"the {name} argument")
    try:
        return derive(settings, given, "the API call")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _printer(printer: Printer | None) -> Printer:
    """The printer given, else one that prints only warnings and errors (on stderr)."""
    return printer if printer is not None else Printer(out=silent, quiet=True)


def _run_result(outcome: RunOutcome) -> RunResult:
    return RunResult(
        run_id=str(outcome.summary.get("runId", "")),
        path=Path(outcome.path),
        status=outcome.status.value,
        exit_code=outcome.exit_code,
        summary=SummaryLine.model_validate(outcome.summary),
        evaluations=tuple(EvaluationLine.model_validate(line) for line in outcome.evaluations),
    )


def _systems(
    systems: SystemsSpec | None, search: SearchFunction | None, name: str | None, corpus: str | Path | None, fields: str | None = None
) -> SystemsSpec | None:
    """``systems`` with the Python ``search`` function (named ``name``), the ``corpus`` its text-less hits are
    read from and the ``fields`` mapping of its hits' keys."""
    if search is None and corpus is None and fields is None:
        return systems
    spec = systems or SystemsSpec()
    functions = (*spec.functions, (name, search)) if search is not None else spec.functions
    return replace(spec, functions=functions, corpus=Path(corpus) if corpus is not None else spec.corpus, fields=fields or spec.fields)


def _query_set(queries: str | Path | QuerySet | Sequence[Query | dict[str, Any]] | None) -> Path | QuerySet | None:
    if queries is None or isinstance(queries, (Path, QuerySet)):
        return queries
    if isinstance(queries, str):
        return Path(queries)
    data = {"queries": [q.model_dump() if isinstance(q, Query) else q for q in queries]}
    try:
        return QuerySet.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"not a query set: {query_set_problems(exc, data)}") from None


def evaluate(
    queries: str | Path | QuerySet | Sequence[Query | dict[str, Any]] | None = None,
    *,
    search: SearchFunction | None = None,
    name: str | None = None,
    corpus: str | Path | None = None,
    fields: str | None = None,
    out_dir: str | Path | None = None,
    resume: str | Path | None = None,
    systems: SystemsSpec | None = None,
    settings: Settings | None = None,
    printer: Printer | None = None,
    **options: Any,
) -> RunResult | None:
    """Phase two (``judge-runner evaluate``): judge the search on ``queries`` (a query-set file, or the
    queries themselves), or continue the interrupted run ``resume``. ``search``: a Python function
    ``(query, k) -> hits`` judged like a command (:mod:`judge_runner.search.python_search`), named
    ``name``; ``corpus``: the folder or BEIR corpus its text-less hits are read from; ``fields``: which key
    of a hit holds what (``"id=doc_id,text=body"``, as ``--search-fields``). Without ``search`` or
    ``systems`` the built-in index is judged; ``out_dir`` None: ``resume``'s folder, else ``quality-results``.
    Returns None when a resumed run had nothing left."""
    spec = _systems(systems, search, name, corpus, fields)
    outcome = evaluate_job(
        make_settings(settings, **options),
        _query_set(queries),
        Path(resume) if resume is not None else None,
        Path(out_dir) if out_dir is not None else None,
        _printer(printer),
        systems=spec,
    )
    return None if outcome is None else _run_result(outcome)


def generate(
    fixtures: str | Path = "fixtures",
    *,
    out: str | Path = "queries.json",
    force: bool = False,
    settings: Settings | None = None,
    printer: Printer | None = None,
    **options: Any,
) -> GenerateResult:
    """Phase one (``judge-runner generate``): write a checked query set about ``fixtures`` to ``out``
    (never over an existing file without ``force``)."""
    result = generate_job(make_settings(settings, **options), Path(fixtures), Path(out), force, _printer(printer))
    return GenerateResult(Path(out), tuple(result.queries), tuple(result.dropped), result.cost_usd)


def generate_and_evaluate(
    fixtures: str | Path = "fixtures",
    *,
    search: SearchFunction | None = None,
    name: str | None = None,
    out_dir: str | Path = "quality-results",
    systems: SystemsSpec | None = None,
    settings: Settings | None = None,
    printer: Printer | None = None,
    **options: Any,
) -> RunResult:
    """The main job (``judge-runner generate-and-evaluate``): index ``fixtures``, write a query set, judge
    the search on it (the built-in one, or ``search``: a Python function, whose text-less hits are read
    from ``fixtures``)."""
    spec = _systems(systems, search, name, None)
    return _run_result(main_job(make_settings(settings, **options), Path(fixtures), Path(out_dir), _printer(printer), systems=spec))


def rejudge(
    run: str | Path,
    *,
    out_dir: str | Path = "quality-results",
    settings: Settings | None = None,
    printer: Printer | None = None,
    **options: Any,
) -> RunResult:
    """``judge-runner rejudge``: the results of the run file ``run`` judged again, with the same shown
    text, by the judge the settings choose, into a new run file that names ``run`` in
    ``provenance.rejudgeOf`` (:mod:`judge_runner.app.rejudge`)."""
    return _run_result(rejudge_job(make_settings(settings, **options), Path(run), Path(out_dir), _printer(printer)))


def trend(results: str | Path = "quality-results", *, min_effect: float = MIN_EFFECT, cache: str | Path | None = None) -> TrendResult:
    """``judge-runner trend`` as data: the runs in ``results`` grouped by judge, each compared with the
    previous comparable run and the baseline (a change counts at least ``min_effect``, 0-1), every run scored
    against the qrels known now (``cache``: a judgment cache file whose labels and people's grades join them)."""
    with reading_cache(Path(cache) if cache is not None else None) as store:
        built = build_trend(Path(results), min_effect, store)
    return TrendResult(tuple(built.groups), built.baseline, built.latest_verdict, tuple(built.judge_changes), tuple(built.warnings), built)


def pr_summary(
    results: str | Path = "quality-results",
    *,
    report_url: str | None = None,
    min_effect: float = MIN_EFFECT,
    cache: str | Path | None = None,
) -> str:
    """``judge-runner report --format github``: the latest run in ``results`` as Markdown for a pull request
    comment or ``$GITHUB_STEP_SUMMARY`` (:func:`judge_runner.analysis.pr_summary.github_summary`), linking
    ``report_url`` (default: the GitHub Actions run's page, when run in one). Raises UsageError when the
    folder holds no complete run."""
    try:
        with reading_cache(Path(cache) if cache is not None else None) as store:
            return github_summary(build_trend(Path(results), min_effect, store), Path(results), report_url or ci_report_url())
    except ValueError as exc:
        raise UsageError(f"no summary: {exc} in {results}") from None
