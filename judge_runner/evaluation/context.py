"""What phase two is given, built once per run and passed down typed: :class:`RunContext`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from judge_runner.core.printer import Say, silent
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.protocol import Judge
from judge_runner.llm.budget import Budget


@dataclass(frozen=True)
class RunOutput:
    """Where phase two's messages go: ``echo`` progress (stdout), ``log`` details (``--verbose``), ``alert``
    failures and stops, which ``--quiet`` still shows (None: ``echo``)."""

    echo: Say = print
    log: Say = silent
    alert: Say | None = None

    @property
    def problems(self) -> Say:
        return self.alert or self.echo

    def prefixed(self, prefix: str) -> RunOutput:
        """The same output with ``prefix`` (``"fts: "``) before every progress and problem line."""
        echo, problems = self.echo, self.problems
        return RunOutput(echo=lambda m: echo(prefix + m), log=self.log, alert=lambda m: problems(prefix + m))


@dataclass(frozen=True)
class RunContext:
    """One run's phase two: the ``judge``, the ``options``, the ``budget`` (None: spend not tracked), the
    judgment ``cache`` (None: ``--no-cache``) and the ``output``. Frozen: :meth:`for_system` derives one."""

    judge: Judge
    options: EvaluateOptions = field(default_factory=EvaluateOptions)
    budget: Budget | None = None
    cache: JudgmentCache | None = None
    output: RunOutput = field(default_factory=RunOutput)

    @property
    def heuristic(self) -> bool:
        """True for the offline heuristic judge (CPU-bound: one query at a time)."""
        return self.judge.heuristic

    @property
    def stopped_by_budget(self) -> bool:
        return self.budget is not None and self.budget.exhausted

    def for_system(self, name: str, options: EvaluateOptions, prefix: bool) -> RunContext:
        """This context for one system of a compare run, with ``prefix``: lines start ``"<name>: "``."""
        return replace(self, options=options, output=self.output.prefixed(f"{name}: ") if prefix else self.output)


QUIET = RunOutput(echo=silent, log=silent, alert=silent)
"""Output that says nothing (a caller that reads the run file instead)."""
