"""The ``judge-runner`` entry point: the click group, and the one place where failures become exit codes.

Exit codes (``judge_runner.core.failures``): 0 ok; 1 quality gate failed or regression; 2 usage or
configuration error; 3 run incomplete; 4 internal error. Commands return their exit code or raise a
``JudgeRunnerError`` carrying it; :func:`run_handled` prints the error and returns the code, and only
this module exits the process. Any other exception is a bug: exit 4, one line, the traceback in a log
(:mod:`judge_runner.app.crashlog`) and, with ``--debug`` or ``JUDGE_RUNNER_DEBUG=1``, on stderr. SIGTERM is turned into Ctrl+C for the duration of a command, so a
stopped run keeps what it judged and writes its summary.
"""

from __future__ import annotations

import signal
import sys
import threading
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
from judge_runner.cli.evaluation import evaluate, generate, generate_and_evaluate
from judge_runner.cli.history import baseline, report, trend
from judge_runner.cli.indexing import index, search
from judge_runner.cli.label import label
from judge_runner.cli.qrels import qrels
from judge_runner.cli.weekly import weekly
from judge_runner.core.failures import EXIT_INCOMPLETE, EXIT_OK, InternalError, JudgeRunnerError


@dataclass
class Invocation:
    """What :func:`run_handled` needs to report a bug: the command line and whether ``--debug`` was given."""

    argv: Sequence[str] = ()
    debug: bool = False


_INVOCATION: ContextVar[Invocation | None] = ContextVar("judge_runner_invocation", default=None)


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread (as Ctrl+C does); the previous
    handler is restored on the way out. Does nothing outside the main thread (signals go to it only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_handled(command: Callable[[], Any], argv: Sequence[str] = ()) -> int:
    """Run ``command`` (click's ``main`` in non-standalone mode, for the command line ``argv``) and return
    the process exit code: its int result, else 0; a JudgeRunnerError prints ``error: <message>`` and
    gives its code; click's usage errors give theirs (2); Ctrl+C or SIGTERM gives 3 (run incomplete),
    not click's 1 (which would read as a failed quality gate); any other exception gives 4 (internal
    error, :func:`report_bug`)."""
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
        return report_bug(exc, invocation)
    finally:
        _INVOCATION.reset(token)
    return code if isinstance(code, int) else EXIT_OK


def report_bug(exc: Exception, invocation: Invocation) -> int:
    """Print one line for an unexpected exception (its traceback logged, unless a job such as ``weekly``
    already logged it and raised an InternalError), plus the scrubbed traceback with ``--debug``; return 4."""
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
    """A click group whose standalone ``main`` (what CliRunner and ``python -m`` call) goes through
    :func:`run_handled`, like the console script."""

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
    help="Print the traceback of an internal error (exit 4) on stderr [env JUDGE_RUNNER_DEBUG=1].",
)
def main() -> None:
    """Measure how good a search is, without grading results by hand.

    \b
    Quick start (no API key needed; uses the offline heuristic judge):
      judge-runner generate-and-evaluate --fixtures fixtures/
    With Claude: export ANTHROPIC_API_KEY=... and run the same command.

    Phase one (generate) has an LLM explore your files and write test queries; phase two (evaluate)
    runs them through the search and has an LLM judge grade every result. Each run is one JSONL file
    in quality-results/.

    \b
    Settings: flags override JUDGE_RUNNER_<SETTING> environment variables (e.g. JUDGE_RUNNER_DB,
    JUDGE_RUNNER_EXTENSIONS, JUDGE_RUNNER_TIMEOUT, JUDGE_RUNNER_MIN_OVERALL), which override
    ./judge-runner.toml or [tool.judge-runner] in ./pyproject.toml (also: weights, [search]).
    Exit codes: 0 ok; 1 quality gate failed; 2 usage or configuration error; 3 run incomplete;
    4 internal error (a bug: one line, the traceback in .judge-runner/errors.log; --debug prints it).
    """


for _command in (index, search, generate, evaluate, generate_and_evaluate, trend, baseline, report, weekly, cache, qrels, label, calibrate):
    main.add_command(_command)


def entry() -> None:
    """The console script ``judge-runner``: run the command line and exit with its code."""
    sys.exit(run_handled(lambda: main.main(standalone_mode=False), sys.argv[1:]))
