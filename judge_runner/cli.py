"""The ``judge-runner`` command line: thin wrappers that parse options and call the modules.

Exit codes: 0 ok; 1 quality gate (``--min-overall``) failed; 2 usage or configuration error;
3 run incomplete (interrupted, budget exhausted, too many failed queries).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from judge_runner import __version__
from judge_runner.config import ConfigError, Settings, load_settings
from judge_runner.evaluate import EXIT_CONFIG, EXIT_INCOMPLETE, EvaluateOptions, provenance, run_evaluation
from judge_runner.llm.errors import AuthError, BudgetExhausted, LLMError, SpendLimitError
from judge_runner.models import Query, QuerySet

PROMPTS = ("generate_system.md", "generate_user.md", "judge_system.md", "judge_user.md")


def _err(message: str) -> None:
    click.echo(message, err=True)


def _fail(message: str, code: int = EXIT_CONFIG) -> None:
    _err(f"error: {message}")
    sys.exit(code)


def _settings(**flags) -> Settings:
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        for name in ("backend", "dsn"):
            flags.setdefault(name, ctx.meta.get(f"judge_runner.{name}"))
    try:
        return load_settings(flags)
    except ConfigError as exc:
        _fail(str(exc))
        raise  # unreachable


# -- shared options --------------------------------------------------------------------------------
def _remember(ctx, param, value):
    ctx.meta[f"judge_runner.{param.name}"] = value
    return value


def db_option(f):
    """--db, plus --backend and --dsn (kept in the click context and merged by :func:`_settings`)."""
    f = click.option("--dsn", default=None, expose_value=False, callback=_remember,
                     help="PostgreSQL connection URL for --backend postgres [env DATABASE_URL].")(f)
    f = click.option("--backend", type=click.Choice(["sqlite", "postgres"]), default=None, expose_value=False, callback=_remember,
                     help="Where the index lives [default: sqlite; postgres with --dsn or DATABASE_URL].")(f)
    return click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="SQLite index file [default: .judge-runner/index.sqlite; env JUDGE_RUNNER_DB].")(f)


def search_options(f):
    f = click.option("--search-limit", type=click.IntRange(1, 100), default=None, help="Results per query shown to the judge [default: 10].")(f)
    f = click.option("--search-mode", type=click.Choice(["hybrid", "fts", "vector"]), default=None,
                     help="Search mode under test [default: hybrid].")(f)
    return f


def _finite(ctx, param, value):
    if value is not None and not math.isfinite(value):
        raise click.BadParameter("must be a finite number")
    return value


def _options(f, opts):
    for opt in reversed(opts):
        f = opt(f)
    return f


PROVIDER = click.option("--provider", type=click.Choice(["auto", "anthropic", "openai", "offline"]), default=None,
                        help="LLM provider. auto: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY or "
                             "OPENAI_BASE_URL is set, else the offline heuristic [default: auto].")
MODEL = click.option("--model", default=None, help="Model that writes the queries (phase one) [default: claude-sonnet-4-6 / gpt-4.1].")
JUDGE_MODEL = click.option("--judge-model", default=None, help="Model that judges (phase two) [default: --model, else the provider's default].")
COMMON = [
    click.option("--max-budget-usd", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                 help="Start no call that could take the run's cost past this many USD [default: no cap]."),
    click.option("--max-budget-tokens", type=click.IntRange(min=1), default=None,
                 help="Start no call that could take the run past this many tokens (input + output) [default: no cap]."),
    click.option("--price-per-mtok", default=None, metavar="IN,OUT",
                 help="USD per million input and output tokens, for a model missing from the pricing table."),
    click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                 help="Seconds per HTTP attempt [default: 60]."),
    click.option("--call-deadline", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                 help="Seconds per call including its retries [default: 4 x timeout]."),
    click.option("--quiet", is_flag=True, help="Print only the final summary and errors."),
]
CONCURRENCY = click.option("--concurrency", type=click.IntRange(1, 64), default=None, help="Judge calls in flight at once [default: 5; 1 for a local OpenAI-compatible server].")
OUT_DIR = click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("quality-results"), show_default=True,
                       help="Folder for the run file (<UTC timestamp>.jsonl) and the run's query set.")
MIN_OVERALL = click.option("--min-overall", type=click.FloatRange(0, 1), default=None, callback=_finite,
                           help="CI gate: exit 1 when the average overall score is below this (0-1).")


def generate_options(f):
    return _options(f, [PROVIDER, MODEL, *COMMON])


def evaluate_options(f):
    return _options(f, [PROVIDER, JUDGE_MODEL, *COMMON, CONCURRENCY])


def run_options(f):
    return _options(f, [PROVIDER, MODEL, JUDGE_MODEL, *COMMON, CONCURRENCY])


# -- building blocks ------------------------------------------------------------------------------
def _open_index(settings: Settings, must_exist: bool = False):
    """The index; ``must_exist`` opens an existing one read-only (for searching). Exits 2 when unusable."""
    from judge_runner.search.sqlite import IndexMismatchError, SQLiteIndex

    if settings.backend == "postgres":
        if not settings.dsn:
            _fail("--backend postgres needs --dsn URL or DATABASE_URL")
        try:
            from judge_runner.search.postgres import PostgresIndex

            return PostgresIndex(settings.dsn, settings.search, readonly=must_exist, schema=settings.pg_schema)
        except IndexMismatchError as exc:
            _fail(str(exc))
        except Exception as exc:  # psycopg.OperationalError and friends: never echo the DSN's password
            from judge_runner.search.postgres import scrub_secrets

            _fail(f"cannot open the PostgreSQL index at {settings.index_label}: {type(exc).__name__}: "
                  f"{scrub_secrets(str(exc), settings.dsn)[:300]}")
    if must_exist and not settings.db.is_file():
        _fail(f"no index at {settings.db}; run `judge-runner index FIXTURES --db {settings.db}` first")
    try:
        return SQLiteIndex(settings.db, settings.search, readonly=must_exist)
    except IndexMismatchError as exc:
        _fail(str(exc))
    except Exception as exc:  # sqlite3.DatabaseError for a file that is not an index
        _fail(f"cannot open the index {settings.db}: {exc}")


def _walk_options(settings: Settings) -> dict:
    """Which files belong to the corpus: extensions, excluded folder names, size limit."""
    from judge_runner.corpus.walk import DEFAULT_EXCLUDES, parse_extensions

    excludes = tuple(p.strip() for p in settings.exclude.split(",") if p.strip()) if settings.exclude is not None else DEFAULT_EXCLUDES
    return {"extensions": parse_extensions(settings.extensions), "excludes": excludes, "max_bytes": settings.max_file_bytes}


def _check_corpus(settings: Settings, fixtures: Path) -> None:
    """Fail (exit 2) when FIXTURES holds no file to index, before the index is touched (an empty walk
    would otherwise prune every document and every query would be off-topic)."""
    from judge_runner.corpus.walk import parse_extensions, walk_corpus

    walked = walk_corpus(fixtures, **_walk_options(settings))
    if not walked.files:
        exts = ",".join(parse_extensions(settings.extensions))
        reasons: dict[str, int] = {}
        for _, reason in walked.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        skipped = "; skipped: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) if reasons else ""
        _fail(f"{fixtures} holds no file to index (extensions {exts}; hidden files and folders are skipped{skipped})")


def _progress(stage: str, done: int, total: int) -> None:
    _err(f"  {stage} {done}/{total} chunks")


def _index(settings: Settings, fixtures: Path, prune: bool, quiet: bool):
    from judge_runner.search.indexer import index_tree

    index = _open_index(settings)
    started = time.monotonic()
    try:
        report = index_tree(index, fixtures, prune=prune, progress=None if quiet else _progress, **_walk_options(settings))
    except NotADirectoryError as exc:
        index.close()
        _fail(str(exc))
    except KeyboardInterrupt:
        index.close()
        _fail("interrupted while indexing; documents committed so far are kept, run the command again to finish",
              EXIT_INCOMPLETE)
    elapsed = time.monotonic() - started
    return index, report, elapsed


def _describe_index(report, elapsed: float) -> str:
    skipped = ", ".join(f"{len(v)} {k}" for k, v in sorted(report.skipped.items())) or "none"
    text = (f"indexed {report.indexed}, unchanged {report.unchanged}, removed {report.removed}, "
            f"skipped: {skipped} ({report.chunks_embedded} chunks embedded in {elapsed:.1f} s)")
    for reason, sources in sorted(report.skipped.items()):
        text += f"\n  skipped ({reason}): {', '.join(sources[:5])}{' ...' if len(sources) > 5 else ''}"
    for note, sources in sorted(report.notes.items()):
        text += f"\n  note: {note}: {', '.join(sources[:5])}{' ...' if len(sources) > 5 else ''}"
    return text


def _make_providers(settings: Settings, need_generator: bool):
    """``(generator, judge, budget, label)`` for the chosen provider."""
    from judge_runner.llm.budget import Budget
    from judge_runner.llm.retry import RetryPolicy

    budget = Budget(max_usd=settings.max_budget_usd, per_call_cap_usd=settings.per_call_cap_usd, max_tokens=settings.max_budget_tokens)
    name = settings.provider
    reason = "--provider"
    if name == "auto":
        if os.environ.get("ANTHROPIC_API_KEY"):
            name, reason = "anthropic", "ANTHROPIC_API_KEY is set"
        elif os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
            name, reason = "openai", "OPENAI_API_KEY or OPENAI_BASE_URL is set"
        else:
            name, reason = "offline", "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set"
    if name == "offline":
        from judge_runner.llm.offline import OfflineProvider

        provider = OfflineProvider()
        _err(f"provider: offline ({reason}) - a deterministic HEURISTIC judge, not an LLM; set an API key for real judgments")
        return provider, provider, budget
    retry = RetryPolicy(max_retries=settings.max_retries, cap_s=settings.retry_cap, deadline_s=settings.deadline)
    if name == "anthropic":
        from judge_runner.llm.anthropic_provider import DEFAULT_MODEL, AnthropicProvider as cls

        if not os.environ.get("ANTHROPIC_API_KEY"):
            _fail("--provider anthropic needs ANTHROPIC_API_KEY in the environment")
    else:
        from judge_runner.llm.openai_provider import DEFAULT_MODEL, OpenAIProvider as cls

        if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
            _fail("--provider openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)")
    model = settings.model or DEFAULT_MODEL
    judge_model = settings.judge_model or model
    generator = cls(model, retry, budget, settings.timeout) if need_generator else None
    judge = cls(judge_model, retry, budget, settings.timeout)
    _err(f"provider: {name} ({reason}); generator model {model if need_generator else '-'}, judge model {judge_model}")
    if name == "openai":  # a local server: concurrency 1 unless set, and what --timeout means there
        from judge_runner.llm.local_server import local_server_setup, share_server

        share_server(generator, judge)
        settings.concurrency, notes = local_server_setup(judge.base_url, settings.concurrency,
                                                         "concurrency" in settings.model_fields_set, settings.timeout)
        for note in notes:
            _err(note)
    for label, p in (("generator", generator), ("judge", judge)):
        if p is not None and p.price is None:
            p.price = settings.user_price
        if p is not None and p.price is None:
            if settings.max_budget_usd is not None:
                _fail(f"no price is known for the {label} model {p.model}, so --max-budget-usd cannot be enforced; "
                      f"give its price with --price-per-mtok IN,OUT or cap tokens with --max-budget-tokens instead")
            budget.cost_known = False  # the run's cost is unknown, never shown as 0
            _err(f"warning: no price known for the {label} model {p.model}: cost will be reported as unknown"
                 f"{'' if settings.max_budget_tokens else ' (--max-budget-tokens caps the run by tokens)'}")
    return generator, judge, budget


def _generate(settings: Settings, generator, fixtures: Path, count: int, quiet: bool):
    from judge_runner.corpus.walk import parse_extensions
    from judge_runner.generate import generate_queries

    if not quiet:
        _err(f"phase one: writing {count} queries from {fixtures} ...")
    result = generate_queries(generator, fixtures, count, parse_extensions(settings.extensions), log=_err if not quiet else (lambda m: None))
    if not quiet:
        _err(f"phase one: {len(result.queries)} queries kept, {len(result.dropped)} dropped")
    return result


def _prompt_hashes() -> dict[str, str]:
    from judge_runner.resources import prompt_sha256

    return {name: prompt_sha256(name) for name in PROMPTS}


def _check_out_dir(out_dir: Path) -> None:
    """Fail early (exit 2) when the run file could not be written, before any indexing or spending."""
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        _fail(f"cannot write run files to {out_dir}: {probe} is not a writable folder")


def _evaluate(settings: Settings, queries: list[Query], index, judge, budget, out_dir: Path, quiet: bool,
              generation=None, generator_model: str | None = None, stopped_before: BaseException | None = None,
              prior: list[dict] | None = None, run_id: str | None = None, all_queries: list[Query] | None = None,
              resumed_from: Path | None = None) -> int:
    from judge_runner.generate import query_set_sha256
    from judge_runner.results import RunWriter, utc_now

    try:
        writer = RunWriter(out_dir, run_id=run_id)
    except OSError as exc:
        _fail(f"cannot write to {out_dir}: {exc}")
    config = {
        "searchMode": settings.search_mode, "searchLimit": settings.search_limit, "concurrency": settings.concurrency,
        "weights": settings.weights, "timeoutS": settings.timeout, "callDeadlineS": settings.deadline,
        "maxRetries": settings.max_retries, "maxBudgetUsd": settings.max_budget_usd, "perCallCapUsd": settings.per_call_cap_usd,
        "minOverall": settings.min_overall, "index": settings.index_label,
    }
    if generation is not None or stopped_before is not None:
        config["count"] = settings.count
    if all_queries or queries:
        # keep the set beside the run: next week can evaluate the very same queries, and --resume finds it
        query_file = writer.path.with_suffix(".queries.json")
        query_file.write_text(QuerySet(queries=all_queries or queries).model_dump_json(indent=2) + "\n", encoding="utf-8")
        config["querySetFile"] = query_file.name
    run_start = {
        "config": config,
        "provenance": provenance(judge, generator_model, _prompt_hashes(), query_set_sha256(all_queries or queries),
                                 index.get_meta("corpus_fingerprint") or "", settings.search.model_dump()),
        "queriesGenerated": generation.generated if generation else None,
        "queriesDropped": len(generation.dropped) if generation else 0,
    }
    if resumed_from:
        # a resumed run keeps its place in time: the original start, with the resume time beside it
        original, _ = _resume_start(resumed_from)
        run_start["resumedFrom"] = resumed_from.name
        run_start["resumedAt"] = utc_now()
        if original.get("timestamp"):
            run_start["timestamp"] = original["timestamp"]
    options = EvaluateOptions(settings.search_mode, settings.search_limit, settings.concurrency, settings.weights, settings.min_overall)
    echo = (lambda m: None) if quiet else click.echo
    log = (lambda m: None) if quiet else _err
    outcome = run_evaluation(queries, index, judge, writer, run_start, options, budget=budget, echo=echo, log=log,
                             stopped_before=stopped_before, prior=prior)
    _print_summary(outcome.summary, outcome.path)
    return outcome.exit_code


def _print_summary(summary: dict, path: str) -> None:
    heuristic = " (HEURISTIC offline judge)" if summary["heuristicJudge"] else ""
    click.echo(f"\nrun {summary['runId']}{heuristic}: {summary['evaluated']} evaluated, {summary['failed']} failed"
               f"{', INTERRUPTED' if summary['interrupted'] else ''}{', BUDGET EXHAUSTED' if summary['budgetExhausted'] else ''}")
    if summary["averageScores"]:
        click.echo("  averages: " + ", ".join(f"{k} {v:.2f}" for k, v in summary["averageScores"].items()))
    if summary["averageMetrics"]:
        click.echo("  IR metrics: " + ", ".join(f"{k} {v:.3f}" for k, v in summary["averageMetrics"].items()))
    a = summary["abstention"]
    click.echo(f"  abstention: {a['correct']}/{a['offTopic']} off-topic queries abstained; {a['falseAbstentions']} on-topic queries not confident")
    for issue in summary["topIssues"][:3]:
        click.echo(f"  issue ({issue['count']}x): {issue['issue']}")
    if summary["recommendedFocus"]:
        click.echo(f"  recommended focus: {summary['recommendedFocus']}")
    cost = summary["costUsd"]
    click.echo(f"  cost: {'unknown' if cost is None else f'${cost:.4f}'}, {summary['durationS']:.1f} s")
    click.echo(f"  written to {path}")
    gate = summary.get("qualityGate")
    if gate and not gate["passed"]:
        overall = "none evaluated" if gate["overall"] is None else f"{gate['overall']:.3f}"
        _err(f"quality gate failed: average overall {overall} is below --min-overall {gate['minOverall']}")


def _run_llm_step(fn):
    """Run phase one, mapping LLM failures to exit codes (2 for a refused key, 3 for budget/spend)."""
    try:
        return fn()
    except AuthError as exc:
        _fail(f"{exc}; check the API key", EXIT_CONFIG)
    except (BudgetExhausted, SpendLimitError) as exc:
        _fail(str(exc), EXIT_INCOMPLETE)
    except LLMError as exc:
        _fail(f"phase one failed: {exc}", EXIT_INCOMPLETE)


# -- commands ---------------------------------------------------------------------------------------
@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="judge-runner")
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
    Exit codes: 0 ok; 1 quality gate failed; 2 usage or configuration error; 3 run incomplete.
    """


@main.command()
@click.argument("fixtures", type=click.Path(path_type=Path), required=False)
@db_option
@click.option("--beir-corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Index a BEIR-format corpus.jsonl instead of a folder: each {_id, title, text} record is one document.")
@click.option("--prune/--no-prune", default=True, show_default=True, help="Remove documents whose files are gone or no longer match.")
@click.option("--extensions", default=None, help="Comma-separated extensions to index [default: md,markdown,txt,yaml,yml,json,py; env JUDGE_RUNNER_EXTENSIONS].")
@click.option("--exclude", default=None, help="Comma-separated folder names never indexed [default: node_modules,__pycache__,venv,.venv,build,dist,site-packages; env JUDGE_RUNNER_EXCLUDE].")
@click.option("--max-file-bytes", type=click.IntRange(min=1), default=None, help="Skip larger files, with a reason [default: 2097152].")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome counts as JSON.")
def index(fixtures: Path | None, db: Path | None, beir_corpus: Path | None, prune: bool, extensions: str | None,
          exclude: str | None, max_file_bytes: int | None, as_json: bool) -> None:
    """Index a folder of notes, docs, configs and code (or a BEIR corpus) for search.

    \b
    Incremental: unchanged files are not re-embedded; with --prune (the default) documents whose file
    is gone are removed. Hidden files and folders are skipped; a file that cannot be read is skipped
    with its reason and never stops the index.
    \b
    Examples:
      judge-runner index fixtures/
      judge-runner index --beir-corpus scifact/corpus.jsonl --db scifact.sqlite
    """
    if (fixtures is None) == (beir_corpus is None):
        _fail("give either a FIXTURES folder or --beir-corpus FILE")
    settings = _settings(db=db, extensions=extensions, exclude=exclude, max_file_bytes=max_file_bytes)
    if beir_corpus is not None:
        from judge_runner.search.indexer import BeirFormatError, index_beir

        idx = _open_index(settings)
        started = time.monotonic()
        try:
            report = index_beir(idx, beir_corpus, prune=prune, progress=None if as_json else _progress)
        except BeirFormatError as exc:
            idx.close()
            _fail(str(exc))
        elapsed = time.monotonic() - started
    else:
        if not fixtures.is_dir():
            _fail(f"fixtures folder not found: {fixtures}")
        _check_corpus(settings, fixtures)
        idx, report, elapsed = _index(settings, fixtures, prune, quiet=as_json)
    stats = idx.stats()
    idx.close()
    if as_json:
        click.echo(json.dumps({**report.as_dict(), **stats, "seconds": round(elapsed, 3)}, indent=2))
    else:
        click.echo(_describe_index(report, elapsed))
        click.echo(f"index {settings.index_label}: {stats['documents']} documents, {stats['chunks']} chunks")


@main.command()
@click.argument("query", required=False)
@db_option
@click.option("--mode", type=click.Choice(["hybrid", "fts", "vector"]), default="hybrid", show_default=True,
              help="hybrid = BM25 and vectors fused by RRF; fts = BM25 only; vector = embeddings only.")
@click.option("--limit", type=click.IntRange(1, 1000), default=None, help="Documents to return [default: 10; 100 with --queries].")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON (the search contract).")
@click.option("--queries", "queries_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Batch mode: a JSON-lines file of {_id, text} queries (BEIR queries.jsonl).")
@click.option("--trec-run", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Batch mode: write a TREC run file (qid Q0 docid rank score tag) for trec_eval or ir-measures.")
def search(query: str | None, db: Path | None, mode: str, limit: int | None, as_json: bool, queries_file: Path | None,
           trec_run: Path | None) -> None:
    """Search the index, one query or a batch.

    \b
    Examples:
      judge-runner search "drain a kubernetes node"
      judge-runner search "DEC-0054" --mode fts --json
      judge-runner search --queries queries.jsonl --trec-run run.txt --mode hybrid --limit 100
    """
    settings = _settings(db=db)
    if (queries_file is None) != (trec_run is None):
        _fail("batch mode needs both --queries FILE and --trec-run FILE")
    if (query is None) == (queries_file is None):
        _fail('give either a QUERY or --queries FILE --trec-run FILE')
    idx = _open_index(settings, must_exist=True)
    with idx:
        if queries_file is not None:
            _batch_search(idx, queries_file, trec_run, mode, limit or 100)
            return
        answer = idx.search(query, mode=mode, limit=limit or 10)
    if as_json:
        click.echo(answer.model_dump_json(indent=2))
        return
    if not answer.results:
        click.echo("no results")
    for hit in answer.results:
        anchor = f" > {hit.anchor}" if hit.anchor else ""
        click.echo(f"{hit.rank:>3}. {hit.source}{anchor}  (lines {hit.lineStart}-{hit.lineEnd}, score {hit.score:.4f}, {'+'.join(hit.matchedBy)})")
        click.echo(f"     {hit.snippet[:200]}")
    click.echo(f"confident: {str(answer.confident).lower()}  ({answer.latencyMs:.1f} ms)")


def _batch_search(idx, queries_file: Path, trec_run: Path, mode: str, limit: int) -> None:
    """Run every query of a JSON-lines file and write a TREC run; latency p50/p95 go to stderr."""
    import statistics

    queries: list[tuple[str, str]] = []
    for number, line in enumerate(queries_file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            queries.append((str(record["_id"]), str(record["text"])))
        except (json.JSONDecodeError, KeyError, TypeError):
            _fail(f"{queries_file} line {number} is not a {{\"_id\", \"text\"}} record")
    if not queries:
        _fail(f"{queries_file} holds no queries")
    idx.search(queries[0][1], mode=mode, limit=1)  # warm up: load the model and the vectors
    latencies: list[float] = []
    trec_run.parent.mkdir(parents=True, exist_ok=True)
    with open(trec_run, "w", encoding="utf-8") as out:
        for qid, text in queries:
            answer = idx.search(text, mode=mode, limit=limit)
            latencies.append(answer.latencyMs)
            for hit in answer.results:
                out.write(f"{qid} Q0 {hit.source} {hit.rank} {hit.score:.6f} judge-runner-{mode}\n")
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    _err(f"{len(queries)} queries, mode {mode}: latency p50 {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms; run written to {trec_run}")


@main.command()
@click.option("--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True, help="Knowledge-base folder to explore.")
@click.option("--count", type=click.IntRange(1, 500), default=None, help="Number of queries to write [default: 15].")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("queries.json"), show_default=True, help="Query-set file to write.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@generate_options
def generate(fixtures: Path, count: int | None, out: Path, force: bool, quiet: bool, **flags) -> None:
    """Phase one: have the LLM explore FIXTURES and write a query set (JSON).

    \b
    The agent can only list, glob, read and grep files inside FIXTURES (no hidden files, nothing
    outside). Queries whose expected files do not exist are dropped and counted.
    Exit codes: 0 ok; 2 usage error or API key refused; 3 stopped (budget, interrupt, failure).
    """
    settings = _settings(count=count, **flags)
    if not fixtures.is_dir():
        _fail(f"fixtures folder not found: {fixtures}")
    if out.exists() and not force:
        _fail(f"{out} exists; pass --force to overwrite it or --out to write elsewhere")
    _check_out_dir(out.parent if str(out.parent) else Path("."))
    _check_corpus(settings, fixtures)
    generator, _, budget = _make_providers(settings, need_generator=True)
    try:
        result = _run_llm_step(lambda: _generate(settings, generator, fixtures, settings.count, quiet))
    except KeyboardInterrupt:
        _fail("interrupted; no query set written", EXIT_INCOMPLETE)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result.query_set().model_dump_json(indent=2) + "\n", encoding="utf-8")
    cost = budget.total_cost_usd
    click.echo(f"wrote {len(result.queries)} queries to {out} ({len(result.dropped)} dropped; cost {'unknown' if cost is None else f'${cost:.4f}'})")


@main.command()
@click.option("--queries", "queries_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Query-set JSON written by `generate` (or saved beside a run as <run>.queries.json).")
@click.option("--resume", "resume_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Continue an interrupted run file: its judged queries are copied (never sent again) into a new "
                   "file with the same runId, the rest are judged. Without --queries, uses the query set saved beside it.")
@OUT_DIR
@MIN_OVERALL
@db_option
@search_options
@evaluate_options
def evaluate(queries_path: Path | None, resume_path: Path | None, out_dir: Path, min_overall: float | None, db: Path | None,
             quiet: bool, **flags) -> None:
    """Phase two: search each query of a query set and have the judge grade the results.

    \b
    Needs an index (`judge-runner index FIXTURES`). One JSONL line per query is written the moment
    it is judged; a failed query becomes an error line and the run goes on.
    Exit codes: 0 ok; 1 --min-overall not met; 2 usage or configuration error (or API key refused);
    3 run incomplete (interrupted, budget exhausted, more than a quarter of the queries failed).
    """
    from pydantic import ValidationError

    settings = _settings(db=db, min_overall=min_overall, **flags)
    prior, run_id = [], None
    if resume_path is not None:
        queries_path, prior, run_id = _resume_source(resume_path, queries_path)
    if queries_path is None:
        _fail("give --queries FILE (or --resume RUN.jsonl)")
    try:
        query_set = QuerySet.model_validate_json(queries_path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError, OSError) as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]) if isinstance(exc, ValidationError) else str(exc)
        _fail(f"{queries_path} is not a valid query set: {problems}")
    _check_out_dir(out_dir)
    idx = _open_index(settings, must_exist=True)
    indexed = set(idx.document_hashes())
    missing = sorted({s for q in query_set.queries for s in q.expectedSources if s not in indexed})
    if missing:
        _err(f"warning: {len(missing)} expected source(s) are not in the index {settings.index_label} (their recall will be 0): "
             + ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""))
    queries = query_set.queries
    if resume_path is not None:
        from judge_runner.generate import query_set_sha256

        old_start, _ = _resume_start(resume_path)
        if old_start["provenance"].get("querySetSha256") != query_set_sha256(queries):
            _fail(f"{queries_path} is not the query set {resume_path} was judged on (sha256 differs)")
        done = {line["queryId"] for line in prior}
        queries = [q for q in queries if q.id not in done]
        if not queries:
            click.echo(f"nothing to resume: all {len(done)} queries of run {run_id} are judged in {resume_path}")
            sys.exit(0)
        if not quiet:
            _err(f"resuming run {run_id}: {len(prior)} judged queries copied, {len(queries)} to judge")
    _, judge, budget = _make_providers(settings, need_generator=False)
    with idx:
        code = _evaluate(settings, queries, idx, judge, budget, out_dir, quiet, prior=prior, run_id=run_id,
                         all_queries=query_set.queries, resumed_from=resume_path)
    sys.exit(code)


def _resume_start(path: Path) -> tuple[dict, list[dict]]:
    from judge_runner.results import judged_lines

    start, evaluations = judged_lines(path)
    if start is None or "provenance" not in start:
        _fail(f"{path} is not a judge-runner run file (no run_start line)")
    return start, evaluations


def _resume_source(path: Path, queries_path: Path | None) -> tuple[Path | None, list[dict], str]:
    """The query set, judged lines and run id of a run to resume."""
    start, evaluations = _resume_start(path)
    if queries_path is None:
        saved = start.get("config", {}).get("querySetFile")
        if not saved or not (path.parent / saved).is_file():
            _fail(f"{path} has no saved query set beside it; pass --queries FILE")
        queries_path = path.parent / saved
    return queries_path, evaluations, start["runId"]


@main.command("generate-and-evaluate")
@click.option("--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True, help="Knowledge-base folder.")
@click.option("--count", type=click.IntRange(1, 500), default=None, help="Number of queries to write [default: 15].")
@OUT_DIR
@MIN_OVERALL
@db_option
@search_options
@run_options
def generate_and_evaluate(fixtures: Path, count: int | None, out_dir: Path, min_overall: float | None, db: Path | None,
                          quiet: bool, **flags) -> None:
    """The main job: index FIXTURES (incrementally), write a query set, judge the search on it.

    \b
    Writes quality-results/<UTC timestamp>.jsonl (one line per query as it is judged, a summary last)
    and the query set beside it as <UTC timestamp>.queries.json, to re-run with `evaluate --queries`.
    Exit codes: 0 ok; 1 --min-overall not met; 2 usage or configuration error (or API key refused);
    3 run incomplete (interrupted, budget exhausted, more than a quarter of the queries failed).
    """
    settings = _settings(db=db, count=count, min_overall=min_overall, **flags)
    if not fixtures.is_dir():
        _fail(f"fixtures folder not found: {fixtures}")
    _check_out_dir(out_dir)
    _check_corpus(settings, fixtures)
    generator, judge, budget = _make_providers(settings, need_generator=True)
    if not quiet:
        _err(f"indexing {fixtures} into {settings.index_label} ...")
    idx, report, elapsed = _index(settings, fixtures, prune=True, quiet=quiet)
    with idx:
        if not quiet:
            _err(_describe_index(report, elapsed))
        try:
            generation = _generate(settings, generator, fixtures, settings.count, quiet)
        except (LLMError, KeyboardInterrupt) as exc:
            # a run file is written even when phase one stops: run_start plus a summary saying why
            _err(f"error: phase one stopped: {exc or 'interrupted'}")
            sys.exit(_evaluate(settings, [], idx, judge, budget, out_dir, quiet,
                               generator_model=getattr(generator, "model", None), stopped_before=exc))
        if not generation.queries:
            _fail("phase one produced no usable query", EXIT_INCOMPLETE)
        code = _evaluate(settings, generation.queries, idx, judge, budget, out_dir, quiet,
                         generation=generation, generator_model=generation.model)
    sys.exit(code)


def _arrow(comparison: dict | None) -> str:
    if not comparison or comparison["delta"] is None:
        return ""
    sign = {"regression": "▼", "improvement": "▲", "too few queries": "?"}.get(comparison["verdict"], "·")
    return f"{sign}{comparison['delta']:+.3f}"


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _trend_rows(trend) -> list[dict]:
    rows = []
    for group in trend.groups:
        for row in group["runs"]:
            prev = (row.get("vsPrevious") or {}).get("comparisons", {})
            base = (row.get("vsBaseline") or {}).get("comparisons", {})
            short = {"relevance": "rel", "ranking": "rank", "coverage": "cov", "snippetQuality": "snip", "Recall@10": "R@10", "nDCG@10": "nDCG@10"}
            rows.append({
                "group": group["judge"], "date": row["timestamp"][:16].replace("T", " "), "run": row["runId"],
                "judge": row["judge"], "eval/fail": f"{row['evaluated']}/{row['failed']}",
                **{short.get(c, c): _fmt(row["means"][c]) for c in row["means"]},
                "Δprev overall nDCG": " ".join(filter(None, [_arrow(prev.get("overall")), _arrow(prev.get("nDCG@10"))])) if prev else "",
                "Δbaseline": " ".join(filter(None, [_arrow(base.get("overall")), _arrow(base.get("nDCG@10"))])) if base else "",
                "cost": "unknown" if row["costUsd"] is None and not row["partial"] else ("-" if row["costUsd"] is None else f"${row['costUsd']:.4f}"),
                "note": ("partial (no summary): not compared" if row["partial"] else "no judged queries: not compared"
                         if not row["comparable"] else "; ".join((row.get("vsPrevious") or {}).get("changes", []))),
            })
    return rows


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("quality-results"))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv"]), default="table", show_default=True)
@click.option("--query", "query_id", default=None, help="Show one query (by id) across runs instead.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write a PNG of each dimension over time.")
@click.option("--min-effect", type=click.FloatRange(0, 1), default=0.03, show_default=True,
              help="Smallest change of a mean (0-1) reported as a regression or improvement.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when the latest run regressed (overall or nDCG@10) against the baseline, or the previous comparable run.")
def trend(results: Path, fmt: str, query_id: str | None, plot: Path | None, min_effect: float, fail_on_regression: bool) -> None:
    """Show whether search got better or worse across the runs in RESULTS.

    \b
    Runs are compared only under the same judge (provider, model, prompts). ▲/▼ mark a change beyond
    noise (95% bootstrap interval excludes 0) and at least --min-effect in size; · marks a change
    within noise; ? too few queries (under 5) to tell. Same query set: paired per-query comparison;
    different sets: unpaired. RESULTS defaults to quality-results/.
    """
    from judge_runner.trend import build_trend, plot_trend, query_history

    if query_id is not None:
        history = query_history(results, query_id)
        if not history:
            _fail(f"query {query_id!r} appears in no run in {results}")
        if fmt == "json":
            click.echo(json.dumps(history, indent=2, ensure_ascii=False))
        else:
            for h in history:
                scores = h["scores"] or {}
                metrics = h["metrics"] or {}
                click.echo(f"{h['timestamp'][:16]} {h['runId']}  overall {_fmt(scores.get('overall'))}  "
                           f"nDCG@10 {_fmt(metrics.get('nDCG@10'))}  labels {h['labels']}  ({h['judge']})")
        return
    result = build_trend(results, min_effect)
    for warning in result.warnings:
        _err(f"warning: {warning}")
    rows = _trend_rows(result)
    if not rows:
        _fail(f"no judge-runner runs in {results}")
    if fmt == "json":
        click.echo(json.dumps({"groups": result.groups, "baseline": result.baseline, "latest": result.latest_verdict,
                               "warnings": result.warnings}, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    elif fmt == "markdown":
        headers = [h for h in rows[0] if h != "group"]
        for group in result.groups:
            click.echo(f"\n### Judge {group['judge']}" + (f" — {group['reason']}" if group["reason"] else ""))
            click.echo("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers))
            for row in (r for r in rows if r["group"] == group["judge"]):
                click.echo("| " + " | ".join(str(row[h]) for h in headers) + " |")
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        # a trend table is wide: never fold numbers (in a pipe, a log or a mail there is no terminal width)
        console.width = max(console.width, 140) if console.is_terminal else 220
        for group in result.groups:
            table = Table(title=f"judge {group['judge']}" + (f"\n({group['reason']})" if group["reason"] else ""),
                          title_justify="left")
            hidden = ("group", "judge", "note")
            for header in [h for h in rows[0] if h not in hidden]:
                table.add_column(header, no_wrap=True)
            group_rows = [r for r in rows if r["group"] == group["judge"]]
            for row in group_rows:
                table.add_row(*[str(v) for k, v in row.items() if k not in hidden])
            console.print(table)
            for row in group_rows:
                if row["note"]:
                    console.print(f"  {row['run']}: {row['note']}", highlight=False)
        if result.baseline:
            console.print(f"baseline: {result.baseline}")
    if plot is not None:
        try:
            click.echo(f"plot written to {plot_trend(results, plot)}", err=True)
        except ValueError as exc:
            _err(f"no plot: {exc}")
    latest = result.latest_verdict
    if fail_on_regression and latest and latest["regression"]:
        bad = [c for c, v in latest["comparisons"].items() if v["verdict"] == "regression"]
        _err(f"regression: run {latest['runId']} is worse than {latest['against']} on {', '.join(bad)}")
        sys.exit(1)


@main.group()
def baseline() -> None:
    """Pin the run that trend compares against."""


@baseline.command("set")
@click.argument("run_id")
@click.option("--results", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("quality-results"), show_default=True)
def baseline_set(run_id: str, results: Path) -> None:
    """Pin RUN_ID (or `latest`, the newest complete run) as the baseline of RESULTS."""
    from judge_runner.trend import set_baseline

    try:
        chosen = set_baseline(results, run_id)
    except ValueError as exc:
        _fail(str(exc))
    click.echo(f"baseline set to {chosen.run_id} ({chosen.timestamp[:16]}, judge {chosen.judge_label})")


@main.command()
@click.argument("results", type=click.Path(file_okay=False, path_type=Path), default=Path("quality-results"))
@click.option("--since", default="7d", show_default=True,
              help="Period whose runs the cost table lists (e.g. 7d, 36h, 2w); headline and charts use the latest run and all history.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"), show_default=True,
              help="Folder for report-<date>.md, report-<date>.html and the chart PNGs (a report of the same day is replaced).")
def report(results: Path, since: str, out_dir: Path) -> None:
    """Write the weekly report (Markdown and a self-contained HTML page) from the runs in RESULTS."""
    from judge_runner.report import build_report, parse_since

    try:
        parse_since(since)
    except ValueError as exc:
        _fail(str(exc))
    if not results.is_dir():
        _fail(f"results folder not found: {results}")
    try:
        written = build_report(results, out_dir, since)
    except ValueError as exc:
        _fail(f"no report: {exc} in {results}")
    click.echo(f"report written to {written.markdown} and {written.html}")


class _Tee:
    """Mirror a text stream into a log file (weekly runs log everything they print)."""

    def __init__(self, stream, log):
        self.stream, self.log = stream, log

    def write(self, text):
        self.log.write(text)
        self.log.flush()
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()
        self.log.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


@main.command()
@click.option("--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True, help="Knowledge-base folder.")
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Query set to evaluate [default: the set pinned in RESULTS/pinned-queries.json].")
@click.option("--regenerate", is_flag=True, help="Write a fresh query set (phase one) and pin it for the following weeks.")
@click.option("--count", type=click.IntRange(1, 500), default=None, help="Queries when generating a set (first run or --regenerate) [default: 15].")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path("quality-results"), show_default=True)
@click.option("--reports", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"), show_default=True)
@click.option("--keep", type=click.IntRange(min=1), default=52, show_default=True, help="Run files to keep (the baseline is always kept).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append everything printed to this file [default: RESULTS/weekly.log].")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when this run regressed against the baseline or previous run.")
@MIN_OVERALL
@db_option
@search_options
@run_options
def weekly(fixtures: Path, queries_path: Path | None, regenerate: bool, count: int | None, results: Path, reports: Path, keep: int,
           log_path: Path | None, fail_on_regression: bool, min_overall: float | None, db: Path | None, quiet: bool, **flags) -> None:
    """One command for cron: evaluate, report, prune old runs, under a lock.

    \b
    1. takes RESULTS/.weekly.lock (a second, overlapping run exits 3 at once and touches nothing);
    2. indexes FIXTURES incrementally;
    3. evaluates the pinned query set (generates and pins one on the first run or with --regenerate);
    4. writes the report into --reports, then keeps only the newest --keep run files.
    Never prompts. Exit codes as for evaluate; with --fail-on-regression, 1 on a regression.
    \b
    crontab:  0 6 * * 1  cd /srv/kb && /opt/judge-runner/.venv/bin/judge-runner weekly --fixtures docs/ --quiet
    """
    import fcntl

    results.mkdir(parents=True, exist_ok=True)
    log_path = log_path or results / "weekly.log"
    code = 2
    with open(results / ".weekly.lock", "w") as lock_file:  # released when the file closes, even on a crash
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _fail(f"another weekly run holds {results / '.weekly.lock'}; not starting a second one", EXIT_INCOMPLETE)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n=== judge-runner weekly {datetime.now(timezone.utc).isoformat(timespec='seconds')} ===\n")
            real_out, real_err = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _Tee(real_out, log), _Tee(real_err, log)
            try:
                code = _weekly(fixtures, queries_path, regenerate, count, results, reports, keep, fail_on_regression,
                               min_overall, db, quiet, flags)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            finally:
                sys.stdout, sys.stderr = real_out, real_err
                log.write(f"=== exit {code} ===\n")
    sys.exit(code)


def _weekly(fixtures, queries_path, regenerate, count, results, reports, keep, fail_on_regression, min_overall, db, quiet, flags) -> int:
    from judge_runner.report import build_report
    from judge_runner.trend import build_trend

    settings = _settings(db=db, count=count, min_overall=min_overall, **flags)
    pinned = results / "pinned-queries.json"
    if count is not None and not regenerate and (queries_path or pinned.is_file()):
        _err("note: --count applies only when a query set is generated; using the pinned set (--regenerate for a new one)")
    if queries_path is None and not regenerate and not pinned.is_file():
        _err(f"no pinned query set in {results}: generating one (phase one) and pinning it")
        regenerate = True
    if not fixtures.is_dir():
        _fail(f"fixtures folder not found: {fixtures}")
    _check_corpus(settings, fixtures)
    generator, judge, budget = _make_providers(settings, need_generator=regenerate)
    idx, report_, elapsed = _index(settings, fixtures, prune=True, quiet=quiet)
    with idx:
        if not quiet:
            _err(_describe_index(report_, elapsed))
        generation = None
        if regenerate:
            try:
                generation = _generate(settings, generator, fixtures, settings.count, quiet)
            except (LLMError, KeyboardInterrupt) as exc:
                _err(f"error: phase one stopped: {exc or 'interrupted'}")
                return _evaluate(settings, [], idx, judge, budget, results, quiet, stopped_before=exc)
            if not generation.queries:
                _fail("phase one produced no usable query", EXIT_INCOMPLETE)
            pinned.write_text(QuerySet(queries=generation.queries).model_dump_json(indent=2) + "\n", encoding="utf-8")
            queries = generation.queries
        else:
            source = queries_path or pinned
            try:
                queries = QuerySet.model_validate_json(source.read_text(encoding="utf-8")).queries
            except Exception as exc:  # a broken pinned set: say which file
                _fail(f"{source} is not a valid query set: {str(exc)[:300]}")
        code = _evaluate(settings, queries, idx, judge, budget, results, quiet, generation=generation,
                         generator_model=generation.model if generation else None)
    try:
        written = build_report(results, reports)
        click.echo(f"report written to {written.html}")
    except ValueError as exc:
        _err(f"no report: {exc}")
    _prune_runs(results, keep)
    if code == 0 and fail_on_regression:
        latest = build_trend(results).latest_verdict
        if latest and latest["regression"]:
            _err(f"regression: run {latest['runId']} is worse than {latest['against']}")
            code = 1
    return code


def _prune_runs(results: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` run files (and their saved query sets); never the baseline."""
    from judge_runner.trend import read_baseline

    baseline = read_baseline(results)
    runs = sorted(results.glob("*.jsonl"), key=lambda p: p.name)
    for path in runs[: max(0, len(runs) - keep)]:
        with open(path, encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
        if baseline and (path.stem == baseline or f'"runId":"{baseline}"' in first.replace(" ", "")):
            continue
        path.unlink()
        path.with_suffix(".queries.json").unlink(missing_ok=True)


def entry() -> None:
    """The console script: click's standalone handling, except that Ctrl+C exits 3 (run incomplete),
    as the exit-code contract says, rather than click's 1 (which would read as a failed quality gate)."""
    try:
        code = main.main(standalone_mode=False)
    except click.exceptions.Abort:
        _err("interrupted")
        sys.exit(EXIT_INCOMPLETE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    entry()
