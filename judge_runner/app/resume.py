"""Continuing an interrupted run (``evaluate --resume RUN.jsonl``): the run file read once, and the
settings the remaining queries take from it (judge protocol, batch mode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.config import ConfigError, Settings, derive
from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Printer
from judge_runner.judging.protocol import Judge
from judge_runner.judging.scores import SCORING_VERSION
from judge_runner.runs.lines import BatchLine, EvaluationLine, RunStartLine
from judge_runner.runs.read import resume_state
from judge_runner.search.systems import System


@dataclass(frozen=True)
class ResumePoint:
    """An interrupted run, read once: its ``run_start``, its judged ``evaluation`` lines (the first per query
    id), its ``batch`` lines, and the reader's warnings about damaged lines."""

    path: Path
    start: RunStartLine
    evaluations: tuple[EvaluationLine, ...]
    batches: tuple[BatchLine, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def run_id(self) -> str:
        return self.start.runId

    @property
    def config(self) -> dict[str, Any]:
        """The ``run_start`` config (camelCase keys, as written)."""
        return dict(self.start.config or {})

    @property
    def judged_ids(self) -> set[str]:
        """Query ids already judged (their lines are copied, never sent again)."""
        return {line.queryId for line in self.evaluations}

    def judged_by(self, system: str | None) -> set[str]:
        """Query ids ``system`` (None: the built-in search alone) already judged."""
        return {line.queryId for line in self.evaluations if line.system == system}

    @property
    def recorded_systems(self) -> list[dict[str, Any]] | None:
        """``provenance.searchSystems``: the systems the run started with; None for the built-in search alone."""
        extra = self.start.provenance.model_extra if self.start.provenance is not None else None
        found = (extra or {}).get("searchSystems")
        return [dict(entry) for entry in found] if found else None

    @property
    def search_modes(self) -> list[str]:
        """The built-in search modes the run judged, as it records them (none for a run of other systems only)."""
        recorded = self.recorded_systems
        if recorded is None:
            return [str(self.config["searchMode"])] if self.config.get("searchMode") else []
        return [str(entry.get("mode")) for entry in recorded if entry.get("kind") == "builtin"]

    @property
    def query_set_sha256(self) -> str:
        return self.start.provenance.querySetSha256 if self.start.provenance is not None else ""

    @property
    def saved_query_set(self) -> Path | None:
        saved = self.config.get("querySetFile")
        return self.path.parent / saved if saved and (self.path.parent / saved).is_file() else None


def read_resume_point(path: Path) -> ResumePoint:
    """Raises UsageError when the file cannot be read, has no run_start with provenance, was written by
    ``rejudge``, or was scored under another scoring version (one run would mix two ways of scoring)."""
    try:
        state = resume_state(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if state.run_start is None:
        raise UsageError(f"{path} is not a judge-runner run file (no run_start line)")
    origin = state.run_start.provenance.rejudgeOf if state.run_start.provenance is not None else None
    if origin is not None:
        raise UsageError(
            f"{path} re-judges run {origin.runId}: it searched nothing, so evaluate cannot continue it; run "
            f"`judge-runner rejudge {origin.file or origin.runId}` again (what it judged comes from the judgment cache, at no cost)"
        )
    version = state.run_start.provenance.scoringVersion if state.run_start.provenance is not None else 1
    if version != SCORING_VERSION and state.evaluations:
        raise UsageError(
            f"{path} was scored under scoring version {version}, this judge-runner scores under {SCORING_VERSION}: "
            "a resumed run would mix the two; start a new run instead (what that run judged comes from the judgment cache, "
            "at no cost)"
        )
    return ResumePoint(path, state.run_start, tuple(state.evaluations), tuple(state.batches), tuple(state.warnings))


PROTOCOL_SETTINGS = (
    ("judgeMode", "judge_mode", "judge mode"),
    ("trials", "trials", "trials"),
    ("seed", "seed", "seed"),
    ("searchLimit", "search_limit", "search limit"),
    ("searchMode", "search_mode", "search mode"),
)
"""The run_start ``config`` keys a resumed run takes from its run (``Settings`` field, words for people)."""

SEARCH_SETTINGS = frozenset({"searchMode", "searchLimit"})
"""Keys of :data:`PROTOCOL_SETTINGS` that change the search under test: a resume refuses another value."""

RUN_SOURCE = "the resumed run's run_start"


def resumed_settings(settings: Settings, resume: ResumePoint, printer: Printer) -> Settings:
    """:func:`inherit_protocol`, then :func:`inherit_batch_mode`, on new settings. Raises UsageError for a
    value no setting accepts."""
    try:
        return inherit_batch_mode(inherit_protocol(settings, resume, printer), resume, printer)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def inherit_protocol(settings: Settings, resume: ResumePoint, printer: Printer) -> Settings:
    """Each setting of :data:`PROTOCOL_SETTINGS` not set for this run is taken from the run's config, said in
    one note; one set to another value is kept and warned about (the run mixes two protocols; its batches in
    flight cannot be picked up). Raises ConfigError for a value no setting accepts."""
    config = resume.config
    taken: dict[str, Any] = {}
    words_taken, differ = [], []
    for key, name, words in PROTOCOL_SETTINGS:
        if key not in config or config[key] is None:
            continue
        shown = ",".join(resume.search_modes) if key == "searchMode" else config[key]
        if name not in settings.model_fields_set:
            taken[name] = config[key]
            if shown:  # a run of other systems only has no search mode to speak of
                words_taken.append(f"{words} {shown}" if key != "trials" else f"{shown} trials")
        elif str(getattr(settings, name)) != str(config[key]):
            if key in SEARCH_SETTINGS:
                was = (
                    f"differs from run {resume.run_id}'s {shown}"
                    if shown
                    else f"names a built-in search, which run {resume.run_id} did not judge"
                )
                raise ConfigError(
                    f"--{words.replace(' ', '-')} {getattr(settings, name)} {was}: one run searches one way; resume without it, or start a new run"
                )
            differ.append((words, getattr(settings, name), config[key]))
    derived = derive(settings, taken, RUN_SOURCE)
    if words_taken:
        printer.note(f"resuming with the run's own protocol: {', '.join(words_taken)}")
    for words, now, was in differ:
        flag = "--" + words.replace(" ", "-")
        batches = (
            f"; its {len(resume.batches)} batch(es) in flight hold other requests and cannot be reused (their results are paid for, "
            f"not used)"
            if resume.batches
            else ""
        )
        printer.err(
            f"warning: {flag} {now} differs from the run's {was}: the remaining queries are judged differently from "
            f"the {len(resume.evaluations)} already judged{batches}"
        )
    return derived


def warn_judge_change(judge: Judge, resume: ResumePoint, printer: Printer) -> None:
    """Warn when the judge differs from the run's so far: two judges mixed, and another provider's batches not
    picked up (they are sent again)."""
    was = resume.start.provenance
    provider, model = (was.provider or None, was.judgeModel) if was is not None else (None, None)
    if (provider, model) == (judge.name, judge.model) or provider is None:
        return
    elsewhere = [b for b in resume.batches if b.provider not in ("", judge.name)]
    lost = (
        f"; its {len(elsewhere)} {elsewhere[0].provider} batch(es) cannot be picked up by {judge.name}: "
        f"their requests are sent again (resume with --provider {provider} to use them)"
        if elsewhere
        else ""
    )
    printer.err(
        f"warning: run {resume.run_id} was judged by {provider} ({model}); the remaining queries are judged by "
        f"{judge.name} ({judge.model}){lost}"
    )


def inherit_batch_mode(settings: Settings, resume: ResumePoint, printer: Printer) -> Settings:
    """A resumed ``--batch`` run stays in batch mode unless ``batch`` is set for this run, so its batches in
    flight are picked up rather than paid for again."""
    was_batch = bool(resume.config.get("batch")) or bool(resume.batches)
    if was_batch and "batch" not in settings.model_fields_set:
        printer.note(f"resuming a --batch run: batch mode on ({len(resume.batches)} batch(es) in its file are picked up, not resubmitted)")
        return derive(settings, {"batch": True}, RUN_SOURCE)
    if resume.batches and not settings.batch:
        printer.err(
            f"warning: {resume.path.name} holds {len(resume.batches)} batch(es) of --batch mode; judging synchronously "
            f"pays again for the requests they hold (resume with --batch to pick them up)"
        )
    return settings


def rebuilds_systems(resume: ResumePoint, asked_ordinary: bool) -> bool:
    """Whether the resumed run's systems are rebuilt from its file (it recorded systems, and no flag names any).
    Raises UsageError for a file whose lines name systems its ``run_start`` does not record (two runs mixed),
    and for systems named to continue a run of the built-in search alone."""
    recorded = resume.recorded_systems
    names = {str(entry.get("name")) for entry in recorded} if recorded else {None}
    stray = {line.system for line in resume.evaluations} - names
    if stray:
        raise UsageError(
            f"{resume.path} holds lines of {', '.join(sorted(str(s or 'the built-in search') for s in stray))}, which its run_start "
            "does not record: it mixes two runs and cannot be continued; start a new run"
        )
    if recorded is None and not asked_ordinary:
        raise UsageError(
            f"run {resume.run_id} judged the built-in search alone; resume it without --search-command, --search-url, --run, "
            "--compare or several --search-mode values (one run searches with one set of systems)"
        )
    return recorded is not None and asked_ordinary


def check_same_systems(resume: ResumePoint, systems: list[System] | None) -> None:
    """Raise UsageError unless ``systems`` are the ones the resumed run started with (names, kinds and settings
    as its provenance records them), so one run never mixes two searches."""
    recorded = resume.recorded_systems or []
    now = json.loads(json.dumps([{"name": s.name, **s.description} for s in systems or []]))
    if now == recorded:
        return
    names = [str(entry.get("name")) for entry in recorded]
    raise UsageError(
        f"run {resume.run_id} started with the systems {', '.join(names)}, and a resumed run must search with the same ones "
        f"({system_difference(recorded, now)}); give the same flags again, or start a new run"
    )


def system_difference(recorded: list[dict[str, Any]], now: list[dict[str, Any]]) -> str:
    """The first way ``now`` differs from the ``recorded`` systems, matched by name, in people's words."""
    was_named = {str(entry.get("name")): entry for entry in recorded}
    now_named = {str(entry.get("name")): entry for entry in now}
    missing = [name for name in was_named if name not in now_named]
    added = [name for name in now_named if name not in was_named]
    if missing or added:
        return "; ".join([f"{', '.join(missing)} not searched here"] * bool(missing) + [f"{', '.join(added)} not in the run"] * bool(added))
    for name, was in was_named.items():
        new = now_named[name]
        for key, old_value, new_value in _differing(was, new):
            return f"{name}: {key} {_shown(old_value)} in the run, {_shown(new_value)} here"
    return f"the same systems in another order: {', '.join(was_named)} in the run, {', '.join(now_named)} here"


def _differing(was: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted key, value in was, value in new)`` for each setting that differs, nested tables opened."""
    found: list[tuple[str, Any, Any]] = []
    for key in sorted({*was, *new}):
        old_value, new_value = was.get(key), new.get(key)
        if isinstance(old_value, dict) and isinstance(new_value, dict):
            found += _differing(old_value, new_value, f"{prefix}{key}.")
        elif old_value != new_value:
            found.append((prefix + key, old_value, new_value))
    return found


def _shown(value: Any) -> str:
    """A recorded setting as people read it: an unset one as "not set", a text as written (quoted when it has spaces)."""
    if value is None or value == {} or value == []:
        return "not set"
    if isinstance(value, str):
        return json.dumps(value) if not value or " " in value else value
    return json.dumps(value)
