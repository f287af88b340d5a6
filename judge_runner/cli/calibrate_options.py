"""The options of ``judge-runner calibrate`` (:mod:`judge_runner.cli.calibrate`), its --help text,
:class:`CalibrateOptions` (the options as click parsed them) and :func:`given_flags`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from pydantic import BaseModel, ConfigDict

from judge_runner.calibrate.pool import BUILTIN_SYSTEMS
from judge_runner.calibrate.probes import PROBES
from judge_runner.calibrate.run import UNLABELLED
from judge_runner.cli.qrels import RESCALE
from judge_runner.core.models import JUDGE_MODES

ALL_SYSTEMS = ",".join(s.name for s in BUILTIN_SYSTEMS)

CALIBRATE_HELP = """Measure the judge against human qrels: agreement, system ranking, and position, injection and length bias.

\b
The pool is the union of the top --pool-depth of several systems (the built-in search's fts, vector,
hybrid and two fusion settings, two degraded controls, and any --run) plus every qrels-judged document
of the sampled queries. The judge labels it (--judge-mode, --trials); figures carry 95% intervals from a
query bootstrap; verdicts follow documented thresholds (docs/calibration.md), once each check has its
minimum of evidence (20 labelled queries, 25 and 4 systems for the ranking, 20 probe queries): below it a
check is insufficient, never a pass, and a calibration with no evidence against the people is
"insufficient", not calibrated.
\b
With --results, the judge's labels are read from judge-runner run files instead (no judge call): agreement
on every returned document that carries a human label too, and the ranking of the runs' systems over the
documents people labelled (--unlabelled).
\b
Examples:
  judge-runner calibrate --beir ../shared/data/scifact --queries-sample 100
  judge-runner calibrate --qrels mine.qrels --queries q.jsonl --corpus corpus.jsonl --provider anthropic
  judge-runner calibrate --results quality-results/20261201T090000Z.jsonl --human-qrels team
\b
Exit codes: 0 written (the verdict is in the file and on stderr); 1 --require-calibrated and the verdict is
failed, inconclusive or insufficient (not enough evidence; written all the same); 2 usage or configuration
error; 3 the judge failed or the calibration was interrupted.
"""
"""``judge-runner calibrate --help``: what the command measures, examples, exit codes."""

CALIBRATE_OPTIONS = [
    click.option(
        "--beir",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="A BEIR folder: queries.jsonl, corpus.jsonl, qrels/<split>.tsv.",
    ),
    click.option("--split", default="test", show_default=True, help="qrels split of --beir."),
    click.option(
        "--qrels",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Your human qrels: BEIR TSV or TREC qrels (TREC with --results).",
    ),
    click.option(
        "--results",
        "results",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A run file whose judge is measured from its labels, no judge call (repeatable).",
    ),
    click.option(
        "--human-qrels",
        "human_set",
        default=None,
        metavar="NAME",
        help="With --results: the human qrels set NAME in the judgment cache.",
    ),
    RESCALE,
    click.option(
        "--queries",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Queries: JSON lines {_id, text} or qid<TAB>text.",
    ),
    click.option(
        "--corpus",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Corpus: JSON lines {_id, title, text} (BEIR corpus.jsonl).",
    ),
    click.option(
        "--queries-sample",
        type=click.IntRange(min=2),
        default=None,
        help="Queries drawn at random (with --seed) [default: all with qrels].",
    ),
    click.option(
        "--seed",
        "sample_seed",
        type=int,
        default=13,
        show_default=True,
        help="Seed of every draw: query sample, shuffles, bootstrap (not the judge's sampling seed).",
    ),
    click.option(
        "--trials",
        "calibration_trials",
        type=click.IntRange(1, 10),
        default=None,
        help="Labels per pair. [default: 3 for a judge without temperature, else 1]",
    ),
    click.option(
        "--compare-output",
        is_flag=True,
        help="Also label with the grade alone and compare both with the people.",
    ),
    click.option(
        "--judge-mode",
        "calibration_mode",
        type=click.Choice([*JUDGE_MODES, "both"]),
        default="pointwise",
        show_default=True,
        help="pointwise: one document a call; batched: several, shuffled; both.",
    ),
    click.option("--probes", default=",".join(PROBES), show_default=True, help="Comma-separated probes to run, or none."),
    click.option(
        "--systems",
        default=ALL_SYSTEMS,
        show_default=True,
        help="Built-in search configurations compared, or none with --run.",
    ),
    click.option(
        "--run",
        "run_files",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A TREC run file (qid Q0 docid rank score tag) to compare as one more system; repeatable.",
    ),
    click.option("--pool-depth", type=click.IntRange(1, 100), default=10, show_default=True, help="Top-k of each system pooled."),
    click.option(
        "--corpus-scope",
        type=click.Choice(["full", "candidates"]),
        default="full",
        show_default=True,
        help="Index the whole corpus, or the qrels documents and BM25 top --candidates.",
    ),
    click.option(
        "--candidates", type=click.IntRange(10, 1000), default=100, show_default=True, help="BM25 depth of --corpus-scope candidates."
    ),
    click.option(
        "--db",
        "calibration_db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The calibration index. [default: .judge-runner/calibrate/...sqlite]",
    ),
    click.option(
        "--unlabelled",
        type=click.Choice(UNLABELLED),
        default=None,
        help="What a document nobody labelled counts as (docs/calibration.md).",
    ),
    click.option(
        "--require-calibrated",
        is_flag=True,
        help="Exit 1 unless the verdict is calibrated (a CI gate).",
    ),
    click.option(
        "--probe-queries",
        type=click.IntRange(min=1),
        default=20,
        show_default=True,
        help="Queries per probe (20 at least for a verdict).",
    ),
    click.option(
        "--bootstrap",
        "resamples",
        type=click.IntRange(0, 100000),
        default=1000,
        show_default=True,
        help="Bootstrap resamples for the 95% intervals (0: no intervals).",
    ),
    click.option("--batch-size", type=click.IntRange(2, 50), default=10, show_default=True, help="Documents per batched call."),
    click.option(
        "--out",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Calibration file [default: calibration/<UTC millisecond>Z-<random suffix>.json].",
    ),
]
"""calibrate's own options, in the order ``--help`` lists them."""


class CalibrateOptions(BaseModel):
    """calibrate's own options by parameter name, as click parsed and checked them (every one given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    beir: Path | None
    split: str
    qrels: Path | None
    results: tuple[Path, ...]
    human_set: str | None
    rescale: dict[int, int]
    queries: Path | None
    corpus: Path | None
    queries_sample: int | None
    sample_seed: int
    calibration_trials: int | None
    compare_output: bool
    calibration_mode: str
    probes: str
    systems: str
    run_files: tuple[Path, ...]
    pool_depth: int
    corpus_scope: str
    candidates: int
    calibration_db: Path | None
    unlabelled: str | None
    require_calibrated: bool
    probe_queries: int
    resamples: int
    batch_size: int
    out: Path | None

    @classmethod
    def split_from(cls, options: dict[str, Any]) -> tuple[CalibrateOptions, dict[str, Any]]:
        """``(calibrate's own options, the rest: the settings' flags)`` of a click command's keyword arguments."""
        own = {name: value for name, value in options.items() if name in cls.model_fields}
        return cls(**own), {name: value for name, value in options.items() if name not in own}


def given_flags(ctx: click.Context) -> dict[str, str]:
    """``{parameter name: flag as spelled}`` of the options given on the command line (not defaulted)."""
    return {
        p.name: p.opts[0]
        for p in ctx.command.params
        if p.name and p.opts and ctx.get_parameter_source(p.name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    }
