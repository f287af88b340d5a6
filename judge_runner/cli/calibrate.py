"""Command ``calibrate``: measure the judge against human qrels, with position, injection and length probes.
Thin: parses options and calls :func:`judge_runner.app.calibrate_job.calibrate_job`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import click

from judge_runner.app.calibrate_job import Source, calibrate_job, calibrate_runs_job, refused_options
from judge_runner.app.dry_run import calibrate_labeler, calibrate_report
from judge_runner.calibrate.pool import BUILTIN_SYSTEMS
from judge_runner.calibrate.probes import PROBES
from judge_runner.calibrate.run import CalibrationConfig
from judge_runner.cli.cache import CACHE
from judge_runner.cli.calibrate_options import CALIBRATE_HELP, CALIBRATE_OPTIONS, given_flags
from judge_runner.cli.options import (
    BATCH,
    COMMON,
    DRY_RUN,
    JUDGE,
    PROVIDER,
    _options,
    check_flags,
    printer,
    settings,
)
from judge_runner.core.failures import EXIT_OK, UsageError
from judge_runner.core.models import JUDGE_MODES, JudgeMode


def _names(value: str, allowed: tuple[str, ...] | None, what: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip() and n.strip() != "none"]
    bad = [n for n in names if allowed is not None and n not in allowed]
    if bad:
        raise UsageError(f"unknown {what} {', '.join(bad)}; choose from {', '.join(allowed or ())} (or none)")
    return names


def run_calibrate(
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
    calibration_trials: int | None,
    calibration_mode: str,
    probes: str,
    systems: str,
    run_files: tuple[Path, ...],
    pool_depth: int,
    corpus_scope: str,
    candidates: int,
    calibration_db: Path | None,
    unlabelled: str | None,
    require_calibrated: bool,
    probe_queries: int,
    resamples: int,
    batch_size: int,
    out: Path | None,
    quiet: bool,
    dry_run: bool,
    dry_run_json: bool,
    compare_output: bool = False,
    **flags: Any,
) -> int:
    """Command ``calibrate`` (its --help: :data:`judge_runner.cli.calibrate_options.CALIBRATE_HELP`): the options
    checked, then the calibration from run files (--results) or labelled by the judge."""
    config = calibration_config(
        calibration_mode,
        calibration_trials or 0,
        sample_seed,
        pool_depth,
        probes,
        probe_queries,
        resamples,
        batch_size,
        unlabelled,
        bool(results),
    )
    built_in = _names(systems, tuple(s.name for s in BUILTIN_SYSTEMS), "system")
    given = given_flags(click.get_current_context())
    check_options(given, results, dry_run, human_set, qrels, beir, corpus_scope, calibration_mode, config, built_in)
    if results:  # the judge's labels from run files: nothing is judged, nothing indexed
        found = settings(**flags, **({"db": calibration_db} if calibration_db is not None else {}))  # the cache beside --db
        calibrate_runs_job(found, list(results), qrels, human_set, config, out, printer(quiet), rescale, require_calibrated)
        return EXIT_OK
    labeler = recorder = None
    built = settings(**flags)  # once per command (docs/design.md), whatever the job and its report need
    config = replace(config, compare_output=compare_output)
    if check_flags(dry_run, dry_run_json):  # the pool is built and labelled by a recording judge: nothing sent, no calibration file written
        config, (labeler, recorder) = replace(config, resamples=0), calibrate_labeler(built)
    calibrate_job(
        built,
        Source(beir, split, qrels, queries, corpus, rescale),
        config,
        queries_sample,
        built_in,
        list(run_files),
        corpus_scope,
        candidates,
        calibration_db,
        out,
        printer(quiet),
        labeler,
        dry_run=dry_run,
        require_calibrated=require_calibrated,
    )
    if recorder is not None:
        calibrate_report(built, recorder, calibration_mode, calibration_trials or 0, printer(quiet), dry_run_json)
    return EXIT_OK


def calibration_config(
    mode: str,
    trials: int,
    seed: int,
    depth: int,
    probes: str,
    probe_queries: int,
    resamples: int,
    batch_size: int,
    unlabelled: str | None,
    results: bool,
) -> CalibrationConfig:
    """The calibration's choices from the options: ``both`` modes or one, the probes by name, and a document
    nobody labelled ``unknown`` with --results, else ``non-relevant``, unless --unlabelled says."""
    return CalibrationConfig(
        modes=JUDGE_MODES if mode == "both" else (cast("JudgeMode", mode),),  # click checked the choice
        trials=trials,
        seed=seed,
        depth=depth,
        probes=_names(probes, PROBES, "probe"),
        probe_queries=probe_queries,
        resamples=resamples,
        batch_size=batch_size,
        unlabelled=unlabelled or ("unknown" if results else "non-relevant"),
    )


def check_options(
    given: dict[str, str],
    results: tuple[Path, ...],
    dry_run: bool,
    human_set: str | None,
    qrels: Path | None,
    beir: Path | None,
    corpus_scope: str,
    calibration_mode: str,
    config: CalibrationConfig,
    built_in: list[str],
) -> None:
    """Refuse options that would have no effect (:func:`judge_runner.app.calibrate_job.refused_options`),
    --dry-run with --results and --human-qrels without it. Raises UsageError."""
    refused = refused_options(given, bool(results), human_set, qrels, beir, corpus_scope, calibration_mode, config.probes, built_in)
    if refused or (results and dry_run):
        raise UsageError("; ".join(refused) or "--results reads labels from run files; --dry-run does not apply to it")
    if not results and human_set is not None:
        raise UsageError("--human-qrels names the human labels of --results; give --results RUN.jsonl")


calibrate: click.Command = _options(
    click.command("calibrate", help=CALIBRATE_HELP)(_options(run_calibrate, CALIBRATE_OPTIONS)),
    [PROVIDER, *JUDGE, *COMMON, CACHE, *BATCH, *DRY_RUN],
)
