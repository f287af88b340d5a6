"""Command group ``cache``: what the judgment cache holds, and pruning it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from judge_runner.cli.options import db_option, printer, setting_option, settings
from judge_runner.core.failures import UsageError
from judge_runner.core.timespan import parse_age
from judge_runner.judging.cache import JudgmentCache

CACHE = setting_option("cache", "Judgment cache file [default: beside the index].")


def open_cache(cache: str | Path | None, db: Path | None, must_exist: bool = True, readonly: bool = False) -> JudgmentCache:
    """The cache at ``cache``, else the one beside the index. Raises UsageError when it does not exist
    (``must_exist``), and CacheError when it cannot be used (damaged: exit 3; else exit 2)."""
    path = settings(db=db, cache=cache).cache_path  # validated like every setting
    if path is None:
        raise UsageError("no judgment cache: give --cache PATH")
    if must_exist and not path.exists():
        raise UsageError(f"no judgment cache at {path} (a run writes it; or give --cache PATH)")
    return JudgmentCache(path, readonly=readonly)


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


@click.group()
def cache() -> None:
    """Inspect or prune the judgment cache (labels already paid for; reused by every run)."""


@cache.command("stats")
@CACHE
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def cache_stats(cache: Path | None, db: Path | None, as_json: bool) -> None:
    """How many judgments the cache holds, by mode and label, what they cost, and the people's grades."""
    with open_cache(cache, db, readonly=True) as store:
        stats = store.stats()
    out = printer().out
    if as_json:
        out(json.dumps(stats, indent=2, sort_keys=True))
        return
    cost = stats["costUsd"]
    out(f"{stats['path']}: {stats['judgments']} judgments, {stats['bytes'] / 1e6:.2f} MB")
    out("  by mode: " + (", ".join(f"{k} {v}" for k, v in sorted(stats["byMode"].items())) or "-"))
    out(
        "  labels: "
        + ", ".join(f"{k}: {v}" for k, v in stats["labels"].items())
        + f"; {stats['injectionSuspected']} flagged as addressing the judge ({stats['judgeFlagged']} by the judge, "
        f"{stats['detectorFlagged']} by the detector"
        + (f"; {stats['flagsNotRecorded']} stored before the detector's flag was kept" if stats["flagsNotRecorded"] else "")
        + ")"
    )
    out("  labels by judge: " + (", ".join(f"{k} {v}" for k, v in sorted(stats["labelsByJudge"].items())) or "-"))
    out(
        f"  paid for: ${cost:.4f}"
        + (f" (+{stats['unknownCost']} of unknown price)" if stats["unknownCost"] else "")
        + f", {stats['inputTokens']} input and {stats['outputTokens']} output tokens"
    )
    out(f"  stored from {_when(stats['oldest'])} to {_when(stats['newest'])}; {stats['otherVersions']} of another cache version")
    out("  human qrels: " + (", ".join(f"{k} ({v})" for k, v in sorted(stats["humanQrels"].items())) or "none"))


@cache.command("prune")
@CACHE
@db_option
@click.option("--older-than", default=None, help="Delete judgments older than this (30d, 12h, 8w).")
@click.option("--keep-other-versions", is_flag=True, help="Keep entries of other cache versions.")
def cache_prune(cache: Path | None, db: Path | None, older_than: str | None, keep_other_versions: bool) -> None:
    """Delete old judgments (and those of other cache versions). People's grades are never pruned."""
    try:
        age = parse_age(older_than) if older_than else None
    except ValueError as exc:
        raise UsageError(f"--older-than: {exc}") from None
    with open_cache(cache, db) as store:
        deleted = store.prune(age, other_versions=not keep_other_versions)
    printer().out(f"deleted {deleted} judgments")
