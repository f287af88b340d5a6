"""Command ``label``: a labelling page on loopback that turns a person's grades into a named human qrels set.
Thin: parses options and calls :func:`judge_runner.app.label.server.label_job`."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from judge_runner.app.label.server import LabelRequest, label_job
from judge_runner.app.label.web import HostRule, parse_host_rule
from judge_runner.cli.cache import CACHE
from judge_runner.cli.numbers import FiniteFloatRange
from judge_runner.cli.options import db_option, printer, settings
from judge_runner.core.failures import UsageError
from judge_runner.human.budget import QUESTIONS
from judge_runner.human.options import FLAGS, Sampling
from judge_runner.human.plan import DEFAULT_WIDTH, SAMPLINGS


class _HostRuleType(click.ParamType):
    name = "NAME[:PORT]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> HostRule:
        if isinstance(value, HostRule):
            return value
        try:
            return parse_host_rule(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _systems(value: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",")) if value else ()


SAMPLING_FIELDS = {
    "sample_kind": "kind",
    "query_count": "queries",
    "per_label": "per_label",
    "width": "width",
    "sample_seed": "seed",
    "budget": "budget",
    "budget_minutes": "minutes",
    "question": "question",
    "systems": "systems",
}
"""Each sampling option's parameter name and its :class:`judge_runner.human.options.Sampling` field."""
NOT_WITH_BUDGET = ("queries", "width", "per_label")
"""Sampling fields a budget replaces: how many queries, the width aimed at, the pairs per judge label."""


def _given(ctx: click.Context) -> frozenset[str]:
    """The :class:`judge_runner.human.options.Sampling` fields whose options were given on the command line."""
    return frozenset(f for p, f in SAMPLING_FIELDS.items() if ctx.get_parameter_source(p) == ParameterSource.COMMANDLINE)


def _check_budget(given: frozenset[str], budget: int | None, minutes: float | None) -> None:
    """Refuse (exit 2) what a budget cannot go with (``given``: the sampling fields given, :func:`_given`)."""
    if budget is not None and minutes is not None:
        raise UsageError("--budget (labels) and --budget-minutes (minutes at your pace) are two ways of saying one budget: give one")
    if budget == 0 or minutes == 0:
        raise UsageError("a budget of 0 buys nothing: give --budget N (labels) or --budget-minutes M, at least 1")
    if budget is None and minutes is None:
        return  # --for/--systems without a budget: a resumed session compares them, a new one refuses them
    clash = sorted(given & set(NOT_WITH_BUDGET))
    if clash:
        flags = ", ".join(FLAGS[field] for field in clash)
        raise UsageError(f"{flags} cannot go with a budget: the budget decides how many labels, and where they go")


def _labeller() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@click.command()
@click.argument("results", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Name of the human qrels set (letters, digits, . _ -): its files and its name in the cache.")
@click.option(
    "--sample",
    "sample_kind",
    type=click.Choice(SAMPLINGS),
    default="queries",
    show_default=True,
    help="queries: whole queries (nDCG@10); pairs: (query, document) pairs.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=0),
    default=None,
    help="Spend about N labels where they narrow the --for question most.",
)
@click.option(
    "--budget-minutes",
    type=FiniteFloatRange(min=0),
    default=None,
    help="The budget in minutes of labelling at your pace.",
)
@click.option(
    "--for",
    "question",
    type=click.Choice(QUESTIONS),
    default="mean",
    show_default=True,
    help="The question a budget narrows: mean, difference or ranking.",
)
@click.option(
    "--systems", default=None, metavar="A[,B...]", help="With a budget: the systems, named as the run file's system field names them."
)
@click.option("--queries", "query_count", type=click.IntRange(min=2), default=None, help="Queries to sample [default: enough for --width].")
@click.option(
    "--width",
    type=FiniteFloatRange(0.005, 1.0),
    default=DEFAULT_WIDTH,
    show_default=True,
    help="Aim for a 95% interval of mean nDCG@10 this wide.",
)
@click.option("--per-label", type=click.IntRange(min=1), default=25, show_default=True, help="--sample pairs: pairs per judge label 0-3.")
@click.option("--seed", "sample_seed", type=int, default=13, show_default=True, help="Seed of the sample and of the order shown.")
@click.option("--labeller", default=None, help="Who is labelling, kept with every label [default: the login name].")
@click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("labels"),
    show_default=True,
    help="Where NAME.journal.jsonl (every act, fsynced) and NAME.qrels (TREC qrels) are kept.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port on 127.0.0.1 (0: any free port).")
@click.option(
    "--allow-host",
    "allow_hosts",
    type=_HostRuleType(),
    multiple=True,
    help="Also answer host NAME[:PORT], for a port forward (repeatable; other names: DNS rebinding).",
)
@click.option("--no-cache", is_flag=True, default=None, help="Write the qrels file only; do not import the labels into the judgment cache.")
@CACHE
@db_option
@click.option("--quiet", is_flag=True, help="Print only the URL and the final line.")
def label(
    results: tuple[Path, ...],
    name: str,
    labeller: str | None,
    folder: Path,
    port: int,
    allow_hosts: tuple[HostRule, ...],
    quiet: bool,
    **options: Any,
) -> int:
    """Label search results yourself, on a page served on 127.0.0.1, into the human qrels set NAME.

    \b
    RESULTS are run files to sample from; a session that exists resumes without them. The page never shows
    the judge's label, the rank, the score or the system. Keys: 0-3 label, s skip, u undo. Each label is
    written at once (labels/NAME.journal.jsonl) and becomes labels/NAME.qrels and the human qrels set NAME
    in the judgment cache, which the next evaluate uses (docs/calibration.md). One process per set.
    \b
    With --budget N or --budget-minutes M, the labels go where they narrow the --for question most: a run's
    mean, the difference B - A of two systems (--systems A,B) or the ranking of every system. Units are
    whole queries (nDCG@10) or, with --sample pairs, (query, document) pairs (scaled DCG@10), each drawn
    with a known probability; grades people gave before are free. The last lines give the corrected
    estimate (stopped early: docs/deciding.md).
    \b
    Examples:
      judge-runner label quality-results/20261201T090000Z.jsonl --name team-dec
      judge-runner label --name team-dec            # resume
      judge-runner label quality-results/RUN.jsonl --name ab --budget 150 --for difference --systems hybrid,fts
      judge-runner label quality-results/RUN.jsonl --name rank --budget 400 --for ranking
    Exit codes: 0 stopped with everything saved (Ctrl+C); 2 usage error; 3 stopped by SIGTERM (everything
    saved), or some labels are not in the judgment cache (the last line prints the command that imports them).
    """
    given = _given(click.get_current_context())
    drawn = {field: options.pop(parameter) for parameter, field in SAMPLING_FIELDS.items()}
    _check_budget(given, drawn["budget"], drawn["minutes"])
    sampling = Sampling(**{**drawn, "systems": _systems(drawn["systems"])}, given=given)
    request = LabelRequest(
        name=name,
        folder=folder,
        labeller=labeller or _labeller(),
        results=results,
        sampling=sampling,
        port=port,
        allow_hosts=allow_hosts,
    )
    return label_job(settings(**options), request, printer(quiet)).exit_code
