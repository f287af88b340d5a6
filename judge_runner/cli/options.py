"""Click options shared by several commands, and the settings and printer every command builds from them.
An option that sets a :class:`~judge_runner.config.Settings` field passes its text on to the settings,
which validate it as they validate the same setting from the environment or the config file.
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
    """Settings from the config file, the environment and these flags (``--backend``, ``--dsn`` and
    ``--embedder`` from the click context). Raises UsageError for unusable settings."""
    ctx = click.get_current_context(silent=True)
    return load(merged_flags(ctx, flags))


def merged_flags(ctx: click.Context | None, flags: dict[str, Any]) -> dict[str, Any]:
    """``flags`` plus ``backend``, ``dsn`` and ``embedder`` from the click context."""
    flags = dict(flags)
    if ctx is not None:
        for name in ("backend", "dsn", "embedder"):
            flags.setdefault(name, ctx.meta.get(f"judge_runner.{name}"))
    return flags


def _err(message: str) -> None:
    click.echo(message, err=True)


def printer(quiet: bool = False) -> Printer:
    """Results on stdout, progress and warnings on stderr."""
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
    """A numeric setting's bounds as click writes a range (``1<=x<=64``, ``x>0``), or ``""``."""
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
    """``--<name>`` for the Settings field ``name``: no conversion or check of its own (the settings make
    both), default None, and a metavar, range and completion read from the field."""
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
    """--db, plus --backend and --dsn (kept in the click context for :func:`settings`)."""
    f = setting_option("dsn", "PostgreSQL URL for --backend postgres [env DATABASE_URL].", expose_value=False, callback=_remember)(f)
    f = setting_option("backend", "Where the index lives [default: sqlite; postgres with --dsn].", expose_value=False, callback=_remember)(
        f
    )
    return cast(F, setting_option("db", "SQLite index file [default: .judge-runner/index.sqlite].")(f))


def search_options(f: F) -> F:
    f = setting_option("search_limit", "Results per query shown to the judge [default: 10].")(f)
    f = setting_option(
        "search_mode",
        "Search mode under test; several, comma-separated, side by side [default: hybrid].",
    )(f)
    return f


def _options(f: F, opts: Sequence[Callable[[Any], Any]]) -> F:
    for opt in reversed(opts):
        f = opt(f)
    return f


PROVIDER = setting_option(
    "provider",
    "LLM provider; auto: by the API key set, else offline [default: auto].",
)
MODEL = setting_option(
    "model",
    "Model that writes the queries [default: " + " / ".join(spec.default_model for spec in PROVIDERS.values() if not spec.heuristic) + "].",
)
JUDGE_MODEL = setting_option("judge_model", "Model that judges [default: --model].")
JUDGE = [JUDGE_MODEL, setting_option("reasoning_effort", "Effort of a reasoning judge model [default: low].")]
COMMON = [
    setting_option("max_budget_usd", "Spend at most this many USD [default: no cap]."),
    setting_option("max_budget_tokens", "Spend at most this many tokens [default: no cap]."),
    setting_option("price_per_mtok", "USD per million tokens of a model not in the price table.", metavar="IN,OUT"),
    setting_option("timeout", "Seconds per HTTP attempt [default: 60]."),
    setting_option("call_deadline", "Seconds per call, retries included [default: 4 x timeout]."),
    click.option("--quiet", is_flag=True, help="Print only the final summary and errors."),
]
EMBEDDER = setting_option(
    "embedder", "Sentence embedder [default: the index's own, else openvino].", expose_value=False, callback=_remember
)


def _repeated(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str] | None:
    """A repeated option's values, or None when it was not given (so the settings decide)."""
    return list(value) or None


JUDGE_PROTOCOL = [
    setting_option(
        "judge_mode",
        "A call per result (pointwise) or per query (batched) [default: pointwise].",
    ),
    setting_option(
        "trials",
        "Label each result N times and keep the median [default: 1].",
    ),
    setting_option("seed", "Base seed of the shuffles and the API calls."),
    setting_option("cache", "Judgment cache file [default: beside the index]."),
    click.option("--no-cache", is_flag=True, default=None, help="Read and store nothing in the judgment cache."),
    click.option(
        "--human-qrels",
        multiple=True,
        default=None,
        metavar="NAME",
        callback=_repeated,
        help="Use only these imported sets of people's grades; repeatable [default: all].",
    ),
]
BATCH = [
    setting_option(
        "batch",
        "Judge through the provider's batch API: half price, within 24 h.",
        is_flag=True,
    ),
    setting_option("batch_poll", "Seconds between batch status checks, at most [default: 60]."),
]
KEEP_UNVERIFIED = setting_option("keep_unverified", "Keep, flagged, a query the judge did not verify [default: drop it].", is_flag=True)
CONCURRENCY = setting_option("concurrency", "Judge calls in flight at once [default: 5; 1 for a local server].")
COUNT = setting_option("count", "Number of queries to write [default: 15].")
OUT_DIR = click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("quality-results"),
    show_default=True,
    help="Folder for the run file and its query set.",
)
MIN_OVERALL = setting_option("min_overall", "CI gate: exit 1 when the mean overall score is below this.")
FIXTURES = click.option(
    "--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True, help="Knowledge-base folder."
)


DRY_RUN = [
    click.option(
        "--dry-run",
        is_flag=True,
        help="Print the calls, tokens and cost the run would make; send nothing.",
    ),
    click.option("--json", "dry_run_json", is_flag=True, help="With --dry-run: print the estimate as one JSON object."),
]


def dry_run_options(f: F) -> F:
    return _options(f, DRY_RUN)


def check_flags(dry_run: bool, as_json: bool) -> bool:
    """``dry_run``; raises UsageError for ``--json`` without ``--dry-run``."""
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
