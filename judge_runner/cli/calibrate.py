"""Command ``calibrate``: measure the judge against human qrels, with position, injection and length probes.
Thin: parses options and calls :func:`judge_runner.app.calibrate_job.calibrate_job`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import click

from judge_runner.app.calibrate_job import CalibrateRequest, Source, calibrate_job, calibrate_runs_job, refused_options
from judge_runner.app.dry_run import calibrate_labeler, calibrate_report
from judge_runner.calibrate.pool import BUILTIN_SYSTEMS
from judge_runner.calibrate.probes import PROBES
from judge_runner.calibrate.run import CalibrationConfig
from judge_runner.cli.cache import CACHE
from judge_runner.cli.calibrate_options import CALIBRATE_HELP, CALIBRATE_OPTIONS, CalibrateOptions, given_flags
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


def run_calibrate(quiet: bool, dry_run: bool, dry_run_json: bool, **options: Any) -> int:
    """Command ``calibrate`` (its --help: :data:`judge_runner.cli.calibrate_options.CALIBRATE_HELP`): the options
    checked, then the calibration from run files (--results) or labelled by the judge."""
    own, flags = CalibrateOptions.split_from(options)
    request = calibrate_request(own, dry_run)
    check_options(given_flags(click.get_current_context()), request)
    if request.results:  # the judge's labels from run files: nothing is judged, nothing indexed
        found = settings(**flags, **({"db": request.db} if request.db is not None else {}))  # the cache beside --db
        calibrate_runs_job(found, request, printer(quiet))
        return EXIT_OK
    labeler = recorder = None
    built = settings(**flags)  # once per command (docs/design.md), whatever the job and its report need
    if check_flags(dry_run, dry_run_json):  # the pool is built and labelled by a recording judge: nothing sent, no calibration file written
        request = replace(request, config=replace(request.config, resamples=0))
        labeler, recorder = calibrate_labeler(built)
    calibrate_job(built, request, printer(quiet), labeler)
    if recorder is not None:
        calibrate_report(built, recorder, own.calibration_mode, own.calibration_trials or 0, printer(quiet), dry_run_json)
    return EXIT_OK


def calibrate_request(options: CalibrateOptions, dry_run: bool) -> CalibrateRequest:
    """The request of the options: ``both`` modes or one, the probes and systems by name, and a document nobody
    labelled ``unknown`` with --results, else ``non-relevant``, unless --unlabelled says. Raises UsageError for
    an unknown probe or system."""
    config = CalibrationConfig(
        modes=JUDGE_MODES if options.calibration_mode == "both" else (cast("JudgeMode", options.calibration_mode),),
        trials=options.calibration_trials or 0,
        seed=options.sample_seed,
        depth=options.pool_depth,
        probes=_names(options.probes, PROBES, "probe"),
        probe_queries=options.probe_queries,
        resamples=options.resamples,
        batch_size=options.batch_size,
        unlabelled=options.unlabelled or ("unknown" if options.results else "non-relevant"),
        compare_output=options.compare_output and not options.results,
    )
    return CalibrateRequest(
        config=config,
        source=Source(options.beir, options.split, options.qrels, options.queries, options.corpus, options.rescale),
        sample=options.queries_sample,
        systems=tuple(_names(options.systems, tuple(s.name for s in BUILTIN_SYSTEMS), "system")),
        run_files=options.run_files,
        scope=options.corpus_scope,
        candidates=options.candidates,
        db=options.calibration_db,
        results=options.results,
        human_set=options.human_set,
        out=options.out,
        require_calibrated=options.require_calibrated,
        dry_run=dry_run,
    )


def check_options(given: dict[str, str], request: CalibrateRequest) -> None:
    """Refuse options that would have no effect (:func:`judge_runner.app.calibrate_job.refused_options`),
    --dry-run with --results and --human-qrels without it. Raises UsageError."""
    refused = refused_options(given, request)
    if refused or (request.results and request.dry_run):
        raise UsageError("; ".join(refused) or "--results reads labels from run files; --dry-run does not apply to it")
    if not request.results and request.human_set is not None:
        raise UsageError("--human-qrels names the human labels of --results; give --results RUN.jsonl")


calibrate: click.Command = _options(
    click.command("calibrate", help=CALIBRATE_HELP)(_options(run_calibrate, CALIBRATE_OPTIONS)),
    [PROVIDER, *JUDGE, *COMMON, CACHE, *BATCH, *DRY_RUN],
)
