"""Click options shared by several commands, and the settings and printer every command builds from them.

Options that set a :class:`~judge_runner.config.Settings` field are made by :func:`setting_option`: they
pass the text given on to the settings, which validate it exactly as they validate the same setting from
``JUDGE_RUNNER_<NAME>`` or the config file (one source of truth, one message naming ``--the-flag``); the
option's help shows the range or choices read from the field.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin

import annotated_types
import click

from judge_runner.app.inputs import load
from judge_runner.config import Settings
from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Printer
from judge_runner.llm.registry import PROVIDERS

F = TypeVar("F", bound=Callable[..., Any])  # a click command function, returned by an option decorator as it came


def settings(**flags: Any) -> Settings:
    """Settings from the config file, the environment and these flags, plus ``--backend``/``--dsn``/``--embedder``
    kept in the click context (:func:`db_option`, :data:`EMBEDDER`). Raises UsageError for unusable settings."""
    ctx = click.get_current_context(silent=True)
    return load(merged_flags(ctx, flags))


def merged_flags(ctx: click.Context | None, flags: dict[str, Any]) -> dict[str, Any]:
    """``flags`` plus ``backend``, ``dsn`` and ``embedder`` from the click context (see :func:`settings`)."""
    flags = dict(flags)
    if ctx is not None:
        for name in ("backend", "dsn", "embedder"):
            flags.setdefault(name, ctx.meta.get(f"judge_runner.{name}"))
    return flags


def _err(message: str) -> None:
    click.echo(message, err=True)


def printer(quiet: bool = False) -> Printer:
    """Results through ``click.echo`` on stdout, progress and warnings on stderr."""
    return Printer(click.echo, _err, quiet)


def _field_type(name: str) -> Any:
    annotation = Settings.model_fields[name].annotation
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation


def setting_choices(name: str) -> tuple[str, ...]:
    """The values a Literal setting accepts (empty for other settings)."""
    annotation = _field_type(name)
    return tuple(str(v) for v in get_args(annotation)) if get_origin(annotation) is Literal else ()


def setting_range(name: str) -> str:
    """The bounds of a numeric setting written as click writes a range (``1<=x<=64``, ``x>0``), or ``""``."""
    lower = upper = ""
    for bound in Settings.model_fields[name].metadata:
        if isinstance(bound, annotated_types.Gt):
            lower = f"x>{bound.gt}"
        elif isinstance(bound, annotated_types.Ge):
            capped = any(isinstance(b, (annotated_types.Lt, annotated_types.Le)) for b in Settings.model_fields[name].metadata)
            lower = f"{bound.ge}<=x" if capped else f"x>={bound.ge}"
        elif isinstance(bound, annotated_types.Lt):
            upper = f"x<{bound.lt}"
        elif isinstance(bound, annotated_types.Le):
            upper = f"x<={bound.le}"
    if lower.endswith("<=x") and upper:
        return lower + upper[1:]
    return lower or upper


def setting_option(name: str, help: str, **extra: Any) -> Callable[[Any], Any]:
    """``--<name-with-hyphens>`` for the Settings field ``name``: no conversion and no check of its own
    (the settings make both, whatever the source), default None (not given), a metavar and a help suffix
    derived from the field (``[hybrid|fts|vector]``, ``INTEGER`` and ``[1<=x<=64]``), and shell completion
    of a Literal's choices. ``extra`` goes to :func:`click.option`."""
    choices = setting_choices(name)
    kind = _field_type(name)
    metavar = extra.pop("metavar", None) or (
        f"[{'|'.join(choices)}]" if choices else {int: "INTEGER", float: "FLOAT", Path: "FILE"}.get(kind, "TEXT")
    )
    bounds = setting_range(name)
    if choices:
        extra.setdefault("shell_complete", lambda ctx, param, incomplete: [c for c in choices if c.startswith(incomplete)])
    return click.option(
        "--" + name.replace("_", "-"), name, default=None, metavar=metavar, help=help + (f" [{bounds}]" if bounds else ""), **extra
    )


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    ctx.meta[f"judge_runner.{param.name}"] = value
    return value


def db_option(f: F) -> F:
    """--db, plus --backend and --dsn (kept in the click context and merged by :func:`settings`)."""
    f = setting_option(
        "dsn", "PostgreSQL connection URL for --backend postgres [env DATABASE_URL].", expose_value=False, callback=_remember
    )(f)
    f = setting_option(
        "backend", "Where the index lives [default: sqlite; postgres with --dsn or DATABASE_URL].", expose_value=False, callback=_remember
    )(f)
    return cast(F, setting_option("db", "SQLite index file [default: .judge-runner/index.sqlite; env JUDGE_RUNNER_DB].")(f))


def search_options(f: F) -> F:
    f = setting_option("search_limit", "Results per query shown to the judge [default: 10].")(f)
    f = setting_option(
        "search_mode",
        "Search mode under test [default: hybrid]. Several modes, comma-separated "
        "(fts,vector,hybrid, here or in JUDGE_RUNNER_SEARCH_MODE or the config file), judge the built-in "
        "search in each, side by side in one run; beside an external search, the built-in one joins as the reference.",
    )(f)
    return f


def _options(f: F, opts: Sequence[Callable[[Any], Any]]) -> F:
    for opt in reversed(opts):
        f = opt(f)
    return f


PROVIDER = setting_option(
    "provider",
    "LLM provider. auto: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY or "
    "OPENAI_BASE_URL is set, else the offline heuristic [default: auto].",
)
MODEL = setting_option(
    "model",
    "Model that writes the queries (phase one) [default: "
    + " / ".join(spec.default_model for spec in PROVIDERS.values() if not spec.heuristic)
    + "].",
)
JUDGE_MODEL = setting_option("judge_model", "Model that judges (phase two) [default: --model, else the provider's default].")
JUDGE = [JUDGE_MODEL, setting_option("reasoning_effort", "Reasoning effort of a reasoning judge model (gpt-5, o-series) [default: low].")]
COMMON = [
    setting_option("max_budget_usd", "Start no call that could take the run's cost past this many USD [default: no cap]."),
    setting_option("max_budget_tokens", "Start no call that could take the run past this many tokens (input + output) [default: no cap]."),
    setting_option(
        "price_per_mtok", "USD per million input and output tokens, for a model missing from the pricing table.", metavar="IN,OUT"
    ),
    setting_option("timeout", "Seconds per HTTP attempt [default: 60]."),
    setting_option("call_deadline", "Seconds per call including its retries [default: 4 x timeout]."),
    click.option("--quiet", is_flag=True, help="Print only the final summary and errors."),
]
_EMBEDDER = "The index's, search's, offline judge's and query review's embedder [default: the index's own, else openvino; env JUDGE_RUNNER_EMBEDDER]."
EMBEDDER = setting_option("embedder", _EMBEDDER + " An index built by another is refused.", expose_value=False, callback=_remember)


def _repeated(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str] | None:
    """A repeated option's values as a list, or None when it was not given (so the settings decide)."""
    return list(value) or None


JUDGE_PROTOCOL = [
    setting_option(
        "judge_mode",
        "pointwise: one judge call per result (plus one list-level call per query); batched: one call "
        "per query, results in a seeded random order [default: pointwise].",
    ),
    setting_option(
        "trials",
        "Label each result N times (pointwise: seeds; batched: new shuffles); the label is the median, "
        "Krippendorff's alpha goes in the summary [default: 1].",
    ),
    setting_option("seed", "Base seed of the shuffles, and sent where the API takes one."),
    setting_option("cache", "Judgment cache file [default: judgments.sqlite beside the index]."),
    click.option("--no-cache", is_flag=True, default=None, help="Judge every result again; read and store nothing in the cache."),
    click.option(
        "--human-qrels",
        multiple=True,
        default=None,
        metavar="NAME",
        callback=_repeated,
        help="Apply only these imported human qrels (repeatable) [default: every set imported with `qrels import`].",
    ),
]
BATCH = [
    setting_option(
        "batch",
        "Send the judge's calls through the provider's batch API (Anthropic Message Batches, OpenAI Batch): half "
        "price, results within 24 h; the batch id goes into the run file at once and --resume picks it up "
        "(docs/batch.md). Not for the offline judge or a local server.",
        is_flag=True,
    ),
    setting_option("batch_poll", "Longest wait between two status checks of a batch, in seconds [default: 60]."),
]
_UNVERIFIED = "Keep, flagged 'unverified' on the query-set card, a query the judge did not find answered by its expected sources."
KEEP_UNVERIFIED = setting_option("keep_unverified", _UNVERIFIED + " [default: drop it]", is_flag=True)
CONCURRENCY = setting_option("concurrency", "Judge calls in flight at once [default: 5; 1 for a local OpenAI-compatible server].")
COUNT = setting_option("count", "Number of queries to write [default: 15].")
OUT_DIR = click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("quality-results"),
    show_default=True,
    help="Folder for the run file (<run id>.jsonl: the UTC start to the millisecond and a random suffix) and the run's query set.",
)
MIN_OVERALL = setting_option("min_overall", "CI gate: exit 1 when the average overall score is below this (0-1).")
FIXTURES = click.option(
    "--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True, help="Knowledge-base folder."
)


DRY_RUN = [
    click.option(
        "--dry-run",
        is_flag=True,
        help="Send nothing and write nothing: print the judge calls, tokens and cost (expected and worst case; "
        "sync, batch and cached prices) the run would make, labels already in the judgment cache excluded.",
    ),
    click.option("--json", "dry_run_json", is_flag=True, help="With --dry-run: print the estimate as one JSON object."),
]


def dry_run_options(f: F) -> F:
    return _options(f, DRY_RUN)


def check_flags(dry_run: bool, as_json: bool) -> bool:
    """``dry_run``; raises UsageError for ``--json`` without ``--dry-run`` (it shapes only the estimate)."""
    if as_json and not dry_run:
        raise UsageError("--json prints the estimate of --dry-run; give --dry-run with it")
    return dry_run


def generate_options(f: F) -> F:
    # the judge checks each query is answerable (docs/query-sets.md); --human-qrels (last) does not apply
    return _options(f, [PROVIDER, MODEL, *JUDGE, *COMMON, CONCURRENCY, *JUDGE_PROTOCOL[:-1], KEEP_UNVERIFIED, EMBEDDER])


def evaluate_options(f: F) -> F:
    return _options(f, [PROVIDER, *JUDGE, *COMMON, CONCURRENCY, *JUDGE_PROTOCOL, *BATCH, EMBEDDER])


def run_options(f: F) -> F:
    return _options(f, [PROVIDER, MODEL, *JUDGE, *COMMON, CONCURRENCY, *JUDGE_PROTOCOL, *BATCH, KEEP_UNVERIFIED, EMBEDDER])
