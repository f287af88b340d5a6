"""Command ``calibrate``: measure the judge against human qrels, with position, injection and length probes.
Thin: parses options and calls :func:`judge_runner.app.calibrate_job.calibrate_job`."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from judge_runner.app.calibrate_job import Source, calibrate_job, calibrate_runs_job
from judge_runner.app.dry_run import calibrate_labeler, calibrate_report
from judge_runner.calibrate.pool import BUILTIN_SYSTEMS
from judge_runner.calibrate.probes import PROBES
from judge_runner.calibrate.run import CalibrationConfig
from judge_runner.cli.cache import CACHE
from judge_runner.cli.options import BATCH, COMMON, DRY_RUN, JUDGE_MODEL, PROVIDER, _options, check_flags, printer, settings
from judge_runner.cli.qrels import RESCALE
from judge_runner.core.failures import EXIT_OK, UsageError
from judge_runner.core.models import JUDGE_MODES, JudgeMode

ALL_SYSTEMS = ",".join(s.name for s in BUILTIN_SYSTEMS)


def _names(value: str, allowed: tuple[str, ...] | None, what: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip() and n.strip() != "none"]
    bad = [n for n in names if allowed is not None and n not in allowed]
    if bad:
        raise UsageError(f"unknown {what} {', '.join(bad)}; choose from {', '.join(allowed or ())} (or none)")
    return names


@click.command()
@click.option(
    "--beir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A BEIR folder: queries.jsonl, corpus.jsonl, qrels/<split>.tsv.",
)
@click.option("--split", default="test", show_default=True, help="qrels split of --beir.")
@click.option(
    "--qrels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Your human labels: BEIR qrels TSV (query-id corpus-id score) or TREC qrels (qid 0 docid grade); "
    "with --results, TREC qrels (what `label` and `qrels export` write).",
)
@click.option(
    "--results",
    "results",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A judge-runner run file (repeatable): measure the judge that wrote it against --qrels or --human-qrels, "
    "its labels read from the file: no judge call, no corpus, no index.",
)
@click.option(
    "--human-qrels",
    "human_set",
    default=None,
    metavar="NAME",
    help="With --results: the human qrels set NAME in the judgment cache (from `label` or `qrels import`).",
)
@RESCALE
@click.option(
    "--queries",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Queries: JSON lines {_id, text} or qid<TAB>text.",
)
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Corpus: JSON lines {_id, title, text} (BEIR corpus.jsonl).",
)
@click.option(
    "--queries-sample", type=click.IntRange(min=2), default=None, help="Queries drawn at random (with --seed) [default: all with qrels]."
)
@click.option(
    "--seed",
    "sample_seed",
    type=int,
    default=13,
    show_default=True,
    help="Seed of every draw: query sample, shuffles, bootstrap (not the judge's sampling seed).",
)
@click.option(
    "--trials",
    "calibration_trials",
    type=click.IntRange(1, 10),
    default=1,
    show_default=True,
    help="Labels per pair (Krippendorff's alpha across them).",
)
@click.option(
    "--judge-mode",
    "calibration_mode",
    type=click.Choice([*JUDGE_MODES, "both"]),
    default="pointwise",
    show_default=True,
    help="pointwise: one document per call; batched: several, in a seeded random order; both: pointwise is primary.",
)
@click.option("--probes", default=",".join(PROBES), show_default=True, help="Comma-separated probes to run, or none.")
@click.option(
    "--systems",
    default=ALL_SYSTEMS,
    show_default=True,
    help="Built-in search configurations compared (hybrid adds the degraded controls), or none with --run.",
)
@click.option(
    "--run",
    "run_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TREC run file (qid Q0 docid rank score tag) to compare as one more system; repeatable.",
)
@click.option("--pool-depth", type=click.IntRange(1, 100), default=10, show_default=True, help="Top-k of each system pooled.")
@click.option(
    "--corpus-scope",
    type=click.Choice(["full", "candidates"]),
    default="full",
    show_default=True,
    help="Index the whole corpus, or only qrels documents plus the BM25 top --candidates of each sampled query "
    "(fast; systems then re-rank that set).",
)
@click.option(
    "--candidates", type=click.IntRange(10, 1000), default=100, show_default=True, help="BM25 depth of --corpus-scope candidates."
)
@click.option(
    "--db",
    "calibration_db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="SQLite index of the calibration corpus [default: .judge-runner/calibrate/<collection>-<scope>-<hash>.sqlite].",
)
@click.option("--probe-queries", type=click.IntRange(min=1), default=20, show_default=True, help="Queries each probe uses.")
@click.option(
    "--bootstrap",
    "resamples",
    type=click.IntRange(0, 100000),
    default=1000,
    show_default=True,
    help="Bootstrap resamples for the 95% intervals (0: no intervals).",
)
@click.option("--batch-size", type=click.IntRange(2, 50), default=10, show_default=True, help="Documents per batched call.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Calibration file [default: calibration/<UTC millisecond>Z-<random suffix>.json].",
)
def calibrate(
    beir: Path | None,
    split: str,
    qrels: Path | None,
    rescale: dict[int, int],
    results: tuple[Path, ...],
    human_set: str | None,
    queries: Path | None,
    corpus: Path | None,
    queries_sample: int | None,
    sample_seed: int,
    calibration_trials: int,
    calibration_mode: str,
    probes: str,
    systems: str,
    run_files: tuple[Path, ...],
    pool_depth: int,
    corpus_scope: str,
    candidates: int,
    calibration_db: Path | None,
    probe_queries: int,
    resamples: int,
    batch_size: int,
    out: Path | None,
    quiet: bool,
    dry_run: bool,
    dry_run_json: bool,
    **flags,
) -> int:
    """Measure the judge against human qrels: agreement, system ranking, and position, injection and length bias.

    \b
    The pool is the union of the top --pool-depth of several systems (the built-in search's fts, vector,
    hybrid and two fusion settings, two degraded controls, and any --run) plus every qrels-judged document
    of the sampled queries. The judge labels it (--judge-mode, --trials); figures carry 95% intervals from a
    query bootstrap; verdicts follow documented thresholds (docs/calibration.md).
    \b
    With --results, the judge's labels are read from judge-runner run files instead (no judge call): agreement
    on every returned document that carries a human label too, and the ranking of the runs' systems.
    \b
    Examples:
      judge-runner calibrate --beir ../shared/data/scifact --queries-sample 100
      judge-runner calibrate --qrels mine.qrels --queries q.jsonl --corpus corpus.jsonl --provider anthropic
      judge-runner calibrate --results quality-results/20261201T090000Z.jsonl --human-qrels team
    Exit codes: 0 written (read the verdict); 2 usage or configuration error; 3 the judge failed or interrupted.
    """
    config = CalibrationConfig(
        modes=JUDGE_MODES if calibration_mode == "both" else (cast("JudgeMode", calibration_mode),),  # click checked the choice
        trials=calibration_trials,
        seed=sample_seed,
        depth=pool_depth,
        probes=_names(probes, PROBES, "probe"),
        probe_queries=probe_queries,
        resamples=resamples,
        batch_size=batch_size,
    )
    if results:  # the judge's labels from run files: nothing is judged, nothing indexed
        given = [flag for flag, value in (("--beir", beir), ("--queries", queries), ("--corpus", corpus), ("--run", run_files)) if value]
        if given or dry_run:
            raise UsageError(f"--results reads labels from run files; {', '.join(given) or '--dry-run'} does not apply to it")
        calibrate_runs_job(settings(**flags), list(results), qrels, human_set, config, out, printer(quiet), rescale)
        return EXIT_OK
    if human_set is not None:
        raise UsageError("--human-qrels names the human labels of --results; give --results RUN.jsonl")
    labeler = recorder = None
    if check_flags(dry_run, dry_run_json):  # the pool is built and labelled by a recording judge: nothing sent, no calibration file written
        from dataclasses import replace

        config, (labeler, recorder) = replace(config, resamples=0), calibrate_labeler(settings(**flags))
    calibrate_job(
        settings(**flags),
        Source(beir, split, qrels, queries, corpus, rescale),
        config,
        queries_sample,
        _names(systems, tuple(s.name for s in BUILTIN_SYSTEMS), "system"),
        list(run_files),
        corpus_scope,
        candidates,
        calibration_db,
        out,
        printer(quiet),
        labeler,
        dry_run=dry_run,
    )
    if recorder is not None:
        calibrate_report(settings(**flags), recorder, calibration_mode, calibration_trials, printer(quiet), dry_run_json)
    return EXIT_OK


calibrate = _options(calibrate, [PROVIDER, JUDGE_MODEL, *COMMON, CACHE, *BATCH, *DRY_RUN])
