"""The ``judge-runner`` entry point: the click group, and the one place where failures become exit codes
(``judge_runner.core.failures``). Only this module exits the process. SIGINT and SIGTERM are stop requests
during a command, so a stopped run keeps what it judged; a second signal ends it at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import click

from judge_runner import __version__
from judge_runner.app.crashlog import debug_requested, internal_error, log_traceback, traceback_text
from judge_runner.cli.cache import cache
from judge_runner.cli.calibrate import calibrate
from judge_runner.cli.evaluation import evaluate, generate, generate_and_evaluate, rejudge
from judge_runner.cli.history import baseline, report, trend
from judge_runner.cli.indexing import index, search
from judge_runner.cli.label import label
from judge_runner.cli.qrels import qrels
from judge_runner.cli.weekly import weekly
from judge_runner.core.failures import EXIT_INCOMPLETE, EXIT_OK, InternalError, JudgeRunnerError
from judge_runner.core.interrupts import SIGNALS, STOP, handling
from judge_runner.core.printer import fit_console

QUIT_WAIT_S = 0.5
"""Seconds a stopped process gives its worker threads to end before it ends without them."""


@dataclass
class Invocation:
    """The command line and whether ``--debug`` was given, to report a bug."""

    argv: Sequence[str] = ()
    debug: bool = False


_INVOCATION: ContextVar[Invocation | None] = ContextVar("judge_runner_invocation", default=None)


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While inside, SIGTERM is Ctrl+C (:func:`judge_runner.core.interrupts.handling`); the previous handlers
    are restored after. Does nothing outside the main thread."""
    with handling():
        yield


def _raised_by_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc``'s ``__context__``/``__cause__`` chain holds a KeyboardInterrupt."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def run_handled(command: Callable[[], Any], argv: Sequence[str] = ()) -> int:
    """Run ``command`` and return the exit code: its int result, else 0; a JudgeRunnerError's code after
    ``error: <message>``; 2 for click's usage errors; 3 for Ctrl+C or SIGTERM (not click's 1, a failed
    gate), also for an exception one caused; 4 for any other exception (:func:`report_bug`)."""
    fit_console()  # a console that cannot encode a character gets its ASCII fallback, not a UnicodeEncodeError
    invocation = Invocation(list(argv), debug_requested())
    token = _INVOCATION.set(invocation)
    try:
        with sigterm_as_ctrl_c():
            code = command()
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return EXIT_INCOMPLETE
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except InternalError as exc:
        return report_bug(exc, invocation)
    except JudgeRunnerError as exc:
        click.echo(exc.display(), err=True)
        return exc.exit_code
    except Exception as exc:  # a bug: never a traceback without --debug, never exit 1
        if _raised_by_ctrl_c(exc):  # e.g. "ImportError: initialization failed" of a C extension Ctrl+C cut short
            click.echo("interrupted", err=True)
            return EXIT_INCOMPLETE
        return report_bug(exc, invocation)
    finally:
        _INVOCATION.reset(token)
    return code if isinstance(code, int) else EXIT_OK


def report_bug(exc: Exception, invocation: Invocation) -> int:
    """One line for an unexpected exception, its traceback logged (and printed with ``--debug``); returns 4."""
    error = exc if isinstance(exc, InternalError) else internal_error(exc, log_traceback(exc, invocation.argv))
    if invocation.debug:
        click.echo(traceback_text(error.cause), err=True, nl=False)
    click.echo(error.display(), err=True)
    return error.exit_code


def _debug(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    invocation = _INVOCATION.get()
    if value and invocation is not None:
        invocation.debug = True
    return value


class JudgeRunnerGroup(click.Group):
    """A click group whose standalone ``main`` (CliRunner, ``python -m``) goes through :func:`run_handled`."""

    def main(
        self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None, standalone_mode: bool = True, **extra: Any
    ) -> Any:
        def call() -> Any:
            return super(JudgeRunnerGroup, self).main(args, prog_name, complete_var, standalone_mode=False, **extra)

        if not standalone_mode:
            return call()
        sys.exit(run_handled(call, sys.argv[1:] if args is None else list(args)))


@click.group(cls=JudgeRunnerGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="judge-runner")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_debug,
    help="Print an internal error's traceback [env JUDGE_RUNNER_DEBUG=1].",
)
def main() -> None:
    """Measure how good a search is, without grading results by hand.

    \b
    Quick start (no API key needed; the offline heuristic judge):
      judge-runner generate-and-evaluate --fixtures fixtures/
    With Claude: export ANTHROPIC_API_KEY=... and run the same command.

    Phase one writes test queries from your files; phase two searches them and has an LLM judge label
    every result, into one JSONL file per run in quality-results/.

    \b
    Settings: flags, then JUDGE_RUNNER_<SETTING> variables, then ./judge-runner.toml.
    Exit codes: 0 ok; 1 quality gate failed; 2 usage or configuration error; 3 run incomplete;
    4 internal error (the traceback in .judge-runner/errors.log; --debug prints it).
    """


for _command in (
    index,
    search,
    generate,
    evaluate,
    generate_and_evaluate,
    rejudge,
    trend,
    baseline,
    report,
    weekly,
    cache,
    qrels,
    label,
    calibrate,
):
    main.add_command(_command)


def entry() -> None:
    """The console script ``judge-runner``. Outside the command, SIGINT or SIGTERM ends the process at once
    with exit 3, never a traceback nor death by signal."""
    for number in SIGNALS:
        signal.signal(number, _interrupted_outside_a_command)
    exit_process(run_handled(lambda: main.main(standalone_mode=False), sys.argv[1:]))


def _interrupted_outside_a_command(signum: int, frame: Any) -> None:
    print("interrupted", file=sys.stderr, flush=True)
    _quit(EXIT_INCOMPLETE)


def exit_process(code: int) -> None:
    """End the process with ``code``. After a stop request a thread still in a call is not waited for
    (stderr says so) and the interpreter's teardown is skipped: the run's lines are already fsynced."""
    if STOP.last_count:  # the command was asked to stop
        deadline = time.monotonic() + QUIT_WAIT_S
        for thread in _busy_threads():
            thread.join(max(0.0, deadline - time.monotonic()))
        busy = _busy_threads()
        if busy:
            print(
                f"interrupted: {len(busy)} call(s) still in flight not waited for (a reply on its way may be billed; "
                "it is in no line of the run)",
                file=sys.stderr,
                flush=True,
            )
        _quit(code)
    sys.exit(code)


def _busy_threads() -> list[threading.Thread]:
    """Threads the interpreter would wait for at exit, the current one aside."""
    return [t for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not threading.current_thread()]


def _quit(code: int) -> None:
    """End the process now (stdout and stderr flushed), without waiting for its threads."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
