"""Continuing an interrupted run (``evaluate --resume RUN.jsonl``): the run file read once
(:func:`read_resume_point`), and the settings a resumed run takes from its own run (judge protocol,
batch mode) so that its remaining queries are judged as the others were.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.config import Settings
from judge_runner.core.failures import (
    UsageError,
)
from judge_runner.core.printer import Printer
from judge_runner.runs.read import resume_state
from judge_runner.runs.write import batch_lines, judged_lines


# -- run-file readers (resume, prune) ---------------------------------------------------------------------
@dataclass(frozen=True)
class ResumePoint:
    """An interrupted run to continue: its file, its ``run_start`` line, its judged ``evaluation``
    lines (one per query id), its ``batch`` lines (a ``--batch`` run's batches, picked up again) and
    the reader's warnings about damaged lines (``file:line: ...``)."""

    path: Path
    start: dict
    evaluations: list[dict]
    batches: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = ()  # the reader's words on damaged lines (file:line), said when resuming

    @property
    def run_id(self) -> str:
        """The run's id, kept by the resumed run."""
        return self.start["runId"]

    @property
    def saved_query_set(self) -> Path | None:
        """The query set saved beside the run file, when it is there."""
        saved = self.start.get("config", {}).get("querySetFile")
        return self.path.parent / saved if saved and (self.path.parent / saved).is_file() else None


PROTOCOL_SETTINGS = (
    ("judgeMode", "judge_mode", "judge mode"),
    ("trials", "trials", "trials"),
    ("seed", "seed", "seed"),
    ("searchLimit", "search_limit", "search limit"),
    ("searchMode", "search_mode", "search mode"),
)
"""The run_start ``config`` keys a resumed run takes from its run (``Settings`` field, words for people):
the settings that decide what is asked of the judge and what it sees."""


def inherit_protocol(settings: Settings, resume: ResumePoint, printer: Printer) -> None:
    """A resumed run (sync or ``--batch``) judges its remaining queries as the run judged the others: each
    setting of :data:`PROTOCOL_SETTINGS` not set for this run (flag, environment or config file) is taken
    from the run's ``run_start`` config, and said in one note. A setting set to another value is kept
    and warned about: the run mixes two protocols, and the requests of its batches in flight differ from
    the new ones, so those batches cannot be picked up (their results are paid for and not used)."""
    config = resume.start.get("config") or {}
    taken, differ = [], []
    for key, name, words in PROTOCOL_SETTINGS:
        if key not in config or config[key] is None:
            continue
        if name not in settings.model_fields_set:
            setattr(settings, name, config[key])
            taken.append(f"{words} {config[key]}" if key != "trials" else f"{config[key]} trials")
        elif getattr(settings, name) != config[key]:
            differ.append((words, getattr(settings, name), config[key]))
    if taken:
        printer.note(f"resuming with the run's own protocol: {', '.join(taken)}")
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


def warn_judge_change(judge: Any, resume: ResumePoint, printer: Printer) -> None:
    """Warn when a resumed run's judge (provider or model) is not the one that judged the run so far:
    the run mixes two judges, and its batches of another provider's batch API cannot be picked up
    (they stay unclaimed in that provider's account; their requests are sent again)."""
    was = resume.start.get("provenance") or {}
    provider, model = was.get("provider"), was.get("judgeModel")
    if (provider, model) == (judge.name, judge.model) or provider is None:
        return
    elsewhere = [b for b in resume.batches if b.get("provider") not in (None, judge.name)]
    lost = (
        f"; its {len(elsewhere)} {elsewhere[0].get('provider')} batch(es) cannot be picked up by {judge.name}: "
        f"their requests are sent again (resume with --provider {provider} to use them)"
        if elsewhere
        else ""
    )
    printer.err(
        f"warning: run {resume.run_id} was judged by {provider} ({model}); the remaining queries are judged by "
        f"{judge.name} ({judge.model}){lost}"
    )


def inherit_batch_mode(settings: Settings, resume: ResumePoint, printer: Printer) -> None:
    """A resumed ``--batch`` run stays in batch mode unless ``batch`` was set for this run (flag,
    environment or config file), so its batches in flight are picked up rather than paid for again."""
    was_batch = bool((resume.start.get("config") or {}).get("batch")) or bool(resume.batches)
    if was_batch and "batch" not in settings.model_fields_set:
        settings.batch = True
        printer.note(f"resuming a --batch run: batch mode on ({len(resume.batches)} batch(es) in its file are picked up, not resubmitted)")
    elif resume.batches and not settings.batch:
        printer.err(
            f"warning: {resume.path.name} holds {len(resume.batches)} batch(es) of --batch mode; judging synchronously "
            f"pays again for the requests they hold (resume with --batch to pick them up)"
        )


def read_resume_point(path: Path) -> ResumePoint:
    """Read the run file to resume; raises UsageError when it has no run_start line."""

    start, evaluations = judged_lines(path)
    if start is None or "provenance" not in start:
        raise UsageError(f"{path} is not a judge-runner run file (no run_start line)")
    return ResumePoint(path, start, evaluations, tuple(batch_lines(path)), tuple(resume_state(path).warnings))
