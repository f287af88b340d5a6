"""What phase two is given, built once per run by the job (``judge_runner.app.steps.evaluate_queries``) and
passed down typed: :class:`RunContext` (the judge, the options, the budget, the judgment cache and where the
run's messages go, :class:`RunOutput`). The run loop (:mod:`judge_runner.evaluation.loop`) and the compare
run (:mod:`judge_runner.evaluation.compare`) read it; neither builds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from judge_runner.core.printer import Say, silent
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.protocol import Judge
from judge_runner.llm.budget import Budget


@dataclass(frozen=True)
class RunOutput:
    """Where phase two's messages go: ``echo`` the per-query progress lines (stdout), ``log`` the details
    (``--verbose``), ``alert`` the lines of failed queries and of a stop, which ``--quiet`` still shows
    (None: ``echo``)."""

    echo: Say = print
    log: Say = silent
    alert: Say | None = None

    @property
    def problems(self) -> Say:
        """Where failed queries and stops are said: ``alert``, else ``echo``."""
        return self.alert or self.echo

    def prefixed(self, prefix: str) -> RunOutput:
        """The same output with ``prefix`` (``"fts: "``) before every progress and problem line (a compare
        run's system); ``log`` unchanged."""
        echo, problems = self.echo, self.problems
        return RunOutput(echo=lambda m: echo(prefix + m), log=self.log, alert=lambda m: problems(prefix + m))


@dataclass(frozen=True)
class RunContext:
    """One run's phase two, fixed before its first line: the ``judge`` (its ``heuristic`` flag and, under
    ``--batch``, its ``batching`` coordinator decide how queries are scheduled), the ``options``
    (:class:`~judge_runner.evaluation.options.EvaluateOptions`: search mode and depth, concurrency, the
    protocol), the run's ``budget`` (:class:`~judge_runner.llm.budget.Budget`; None: no spend is tracked,
    as for the offline judge in tests), the judgment ``cache`` labels go through (None: ``--no-cache``) and
    the ``output``. Frozen: a compare run derives one per system with :meth:`for_system`."""

    judge: Judge
    options: EvaluateOptions = field(default_factory=EvaluateOptions)
    budget: Budget | None = None
    cache: JudgmentCache | None = None
    output: RunOutput = field(default_factory=RunOutput)

    @property
    def heuristic(self) -> bool:
        """True for the offline heuristic judge (CPU-bound: one query at a time; named in the progress lines)."""
        return self.judge.heuristic

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the run's budget is spent (no new call may start)."""
        return self.budget is not None and self.budget.exhausted

    def for_system(self, name: str, options: EvaluateOptions, prefix: bool) -> RunContext:
        """This context for one system of a compare run: its own ``options`` (its search mode) and, with
        ``prefix``, every progress and problem line starting ``"<name>: "``."""
        return replace(self, options=options, output=self.output.prefixed(f"{name}: ") if prefix else self.output)


QUIET = RunOutput(echo=silent, log=silent, alert=silent)
"""Output that says nothing (a library caller that reads the run file instead; tests and benchmarks)."""
