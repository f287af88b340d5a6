"""``judge-runner label``: the labelling job: the set's locks, its session, the cache import, the page's server.

:func:`label_job` takes the set (:mod:`.lock`: one writer per set, in the labels folder and in the
judgment cache), opens or starts its session (:mod:`.session`), starts the cache import
(:mod:`.cache`), serves the page (:mod:`.web`) until Ctrl+C, and says where every label went:
the journal and the qrels file always, the judgment cache when it took them, else the command that imports
them (exit 3). A new session draws its items with :mod:`judge_runner.human.plan` (:func:`new_session`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_runner.app.label.cache import CacheReport, CacheSync, import_command
from judge_runner.app.label.web import HOST, HostRule, LabelServer
from judge_runner.config import Settings
from judge_runner.core.failures import EXIT_INCOMPLETE, EXIT_OK, UsageError
from judge_runner.core.interrupts import STOP
from judge_runner.core.printer import Printer, Say
from judge_runner.human.journal import LabelSession
from judge_runner.human.known import known_grades
from judge_runner.human.lock import SetLock, cache_set_lock, holder_record, takeover_note
from judge_runner.human.options import Sampling, asked, check_new, check_resume
from judge_runner.human.pace import Prepared, budget_session, design_marker, estimate_lines, prepare_budget
from judge_runner.human.plan import plan_pairs, plan_queries, recommended_queries
from judge_runner.runs.read import RunFile, read_judged_runs


def new_session(
    session: LabelSession, runs: Sequence[RunFile], sampling: Sampling, labeller: str, printer: Printer, prepared: Prepared | None = None
) -> None:
    """Draw the items (:mod:`judge_runner.human.plan`) and start ``session`` with them, saying how many
    queries the width asks for; with a budget, :func:`judge_runner.human.pace.budget_session` (``prepared``: its
    draw, made before the set was taken)."""
    check_new(sampling)
    if sampling.budgeted:
        budget_session(session, prepared or prepare_budget(runs, sampling, labeller, session.folder), labeller, printer, asked(sampling))
        return
    try:
        recommended, sd, scored = recommended_queries(runs, sampling.width)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    advice = (
        f"about {recommended} of the {scored} queries give a 95% interval of mean nDCG@10 at most {sampling.width:g} wide "
        f"(the run's per-query nDCG@10 spreads with sd {sd:.2f}; fewer when the judge tracks your labels)"
    )
    if sampling.kind == "queries":
        count = sampling.queries or recommended
        items = plan_queries(runs, count, sampling.seed)
        printer.note(f"sampled {min(count, scored)} whole queries ({len(items)} documents): {advice}")
    else:
        items = plan_pairs(runs, sampling.per_label, sampling.seed)
        printer.note(f"sampled {len(items)} pairs, up to {sampling.per_label} per judge label 0-3")
    details = {
        "sampling": sampling.kind,
        "seed": sampling.seed,
        "width": sampling.width,
        "queries": sampling.queries,
        "perLabel": sampling.per_label if sampling.kind == "pairs" else None,
        "recommended": advice if sampling.kind == "queries" else None,
        "runs": [str(r.path) for r in runs],
        "runIds": [r.run_id for r in runs],
        "labeller": labeller,
        "asked": asked(sampling),
    }
    session.start(items, details)


@dataclass(frozen=True, kw_only=True)
class LabelRequest:
    """What ``label`` was asked: the set ``name`` in ``folder``, the run files ``results`` a new session samples
    from (none: resume), the ``sampling``, the ``labeller`` kept with every grade, the ``port`` on 127.0.0.1
    (0: any free one) and the host names the page also answers (``allow_hosts``, ``--allow-host``)."""

    name: str
    folder: Path
    labeller: str
    results: tuple[Path, ...] = ()
    sampling: Sampling = field(default_factory=Sampling)
    port: int = 0
    allow_hosts: tuple[HostRule, ...] = ()


@dataclass(frozen=True)
class LabelResult:
    """What :func:`label_job` ends with: the ``session``, the ``cache`` report (None with ``--no-cache``) and
    the ``exit_code`` (0; 3 when labels did not reach the judgment cache)."""

    session: LabelSession
    cache: CacheReport | None
    exit_code: int


def _take_set(stack: ExitStack, name: str, folder: Path, cache: Path | None, labeller: str, printer: Printer) -> list[SetLock]:
    """Lock the set ``name`` in ``folder`` and, with a cache, the set of that name in it (released by ``stack``),
    saying so when a lock left by a process that is gone is taken over. Raises SetBusy naming the holder."""
    journal = folder / f"{name}.journal.jsonl"
    record = holder_record("label", labeller=labeller, journal=str(journal))
    locks = [SetLock(folder / f"{name}.lock", f"the label set {name!r} ({journal})")]
    if cache is not None:
        locks.append(cache_set_lock(cache, name))
    told: set[Any] = set()
    for lock in locks:
        left = lock.acquire(record)
        stack.callback(lock.release)
        if left is not None and left.get("pid") not in told:
            told.add(left.get("pid"))
            printer.err(takeover_note(lock.what, left))
    return locks


def _prepare(
    folder: Path, name: str, results: Sequence[Path], sampling: Sampling, labeller: str, cache: Path | None, say: Say
) -> Prepared | None:
    """A new budget session's draw, made before the set is taken, so that a budget too small for an estimate is
    refused with no lock, journal or name taken (:func:`judge_runner.human.pace.prepare_budget`; every grade people
    gave before, in the cache or the labels folder, known and free); None otherwise."""
    if not sampling.budgeted or not results or LabelSession(folder, name).exists():
        return None
    check_new(sampling)
    runs = read_judged_runs(results, say)
    known = known_grades(folder, cache, {ev.queryId: ev.query for run in runs for ev in run.evaluations})
    for line in known.warnings:
        say(line)
    return prepare_budget(runs, sampling, labeller, folder, known.grades)


def _open_session(
    session: LabelSession, results: Sequence[Path], sampling: Sampling, labeller: str, printer: Printer, prepared: Prepared | None
) -> None:
    if session.exists():
        session.open()
        check_resume(session.plan, sampling, str(session.journal), session.name)
        if results:
            printer.note(f"resuming {session.journal}: its own sample is kept, the run files given are not read again")
        if sampling.budgeted:
            printer.note(f"resuming {session.journal}: its own draw is kept, and --budget is not spent again")
    else:
        if not results:
            raise UsageError(f"no labelling session {session.name!r} in {session.folder}: give the run files to sample from")
        runs = prepared.runs if prepared is not None else read_judged_runs(results, printer.err)
        new_session(session, runs, sampling, labeller, printer, prepared)


def _serve(server: LabelServer, printer: Printer, ready: Callable[[LabelServer], None] | None) -> bool:
    """Serve until Ctrl+C, SIGTERM or ``shutdown()``; True when SIGTERM stopped it (a stop from outside: exit 3)."""
    try:  # Ctrl+C from the first printed line on stops the server the same way
        view = server.session.view()
        printer.out(f"labelling {view['name']}: {view['progress']['labelled']} of {view['progress']['total']} labelled; open")
        printer.out(f"  {server.url}")
        for url in server.forwarded_urls():
            printer.out(f"  or, through the forward --allow-host names: {url}")
        printer.note("keys: 0-3 label, s skip, u undo (this tab's last label); every label is saved at once; Ctrl+C stops the server")
        if ready is not None:
            threading.Thread(target=ready, args=(server,), daemon=True).start()
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        terminated = STOP.signum == signal.SIGTERM
        printer.err("stopped (SIGTERM)" if terminated else "stopped (Ctrl+C)")
        return terminated
    finally:
        server.server_close()
        server.session.close()
    return False


def closing_lines(session: LabelSession, cache: CacheReport | None) -> list[str]:
    """Where every label went: the journal and the qrels file (always), the judgment cache (``cache``: all of
    them, which not, and the command that imports them; None: ``--no-cache``), and the labels flagged fast."""
    view = session.view()
    progress = view["progress"]
    given = progress["labelled"]
    lines = [
        (
            f"all {given} labelled: the session is done. The labels are in:"
            if given >= progress["total"]
            else f"{given} of {progress['total']} labelled by now; run the same command to go on. The labels are in:"
        ),
        f"  {session.journal} (every act, fsynced) and {session.qrels} ({given} label{'s' if given != 1 else ''})",
    ]
    if cache is not None:
        lines += cache.lines()
    elif given:
        lines += [
            "  not imported into a judgment cache (--no-cache); to import them:",
            "    " + import_command(session.qrels, session.name, None),
        ]
    if progress["fast"]:
        lines.append(
            f"  {progress['fast']} of them given less than {progress['fastFloorSeconds']:g} s after the document was shown: "
            f'flagged "fast": true in the journal; check them'
        )
    return lines


def label_job(
    settings: Settings, request: LabelRequest, printer: Printer, ready: Callable[[LabelServer], None] | None = None
) -> LabelResult:
    """``judge-runner label``: take the set (and its name in the judgment cache of ``settings``), open or start
    its session, serve its page on loopback until Ctrl+C, and say where every label went. ``ready(server)``
    is called once the server listens (tests). Raises UsageError for a bad name, a set another process holds
    (naming it), unreadable runs, a new session without runs, a cache that is no judgment cache, or a port
    in use."""
    name, folder, results, sampling, labeller = request.name, request.folder, request.results, request.sampling, request.labeller
    LabelSession(folder, name)  # the name is checked before anything is locked or made
    cache_path = settings.cache_path
    prepared = _prepare(folder, name, results, sampling, labeller, cache_path, printer.err)
    with ExitStack() as stack:
        locks = _take_set(stack, name, folder, cache_path, labeller, printer)
        sync = None
        if cache_path is not None:
            sync = CacheSync(cache_path, name, printer.err)
            sync.open()
            stack.callback(sync.close, 0.0)  # stops its thread on any way out; the report below closes it first
        session = LabelSession(folder, name, sync)
        _open_session(session, results, sampling, labeller, printer, prepared)
        if sync is not None:
            sync.design = design_marker(session)
            sync.texts = {item.qid: item.query for item in session.items.values()}
            sync.changed(session.qrels, len(session.state.labels))  # whole, with the texts
        try:
            server = LabelServer(session, labeller, request.port, request.allow_hosts, printer.err)
        except OSError as exc:
            raise UsageError(f"cannot listen on {HOST}:{request.port}: {exc}") from None
        for lock in locks:
            lock.update(port=server.port)
        terminated = _serve(server, printer, ready)
        report = None
        if sync is not None:
            if sync.status()["state"] != "current":
                printer.note("waiting for the judgment cache to take the last labels...")
            try:
                report = sync.close()
            except KeyboardInterrupt:
                report = sync.close(0.0)
        for line in closing_lines(session, report) + estimate_lines(session):
            printer.out(line)
    code = EXIT_INCOMPLETE if terminated or (report is not None and not report.complete) else EXIT_OK
    return LabelResult(session, report, code)
