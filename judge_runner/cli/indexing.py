"""Commands ``index`` and ``search``."""

from __future__ import annotations

from pathlib import Path

import click

from judge_runner.app.indexing import index_job
from judge_runner.app.searching import batch_search_job, search_job
from judge_runner.cli.options import EMBEDDER, db_option, printer, setting_option, settings
from judge_runner.core.failures import UsageError
from judge_runner.core.models import SEARCH_MODES, SearchMode


@click.command()
@click.argument("fixtures", type=click.Path(path_type=Path), required=False)
@db_option
@click.option(
    "--beir-corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Index a BEIR corpus.jsonl instead of a folder.",
)
@click.option("--prune/--no-prune", default=True, show_default=True, help="Remove documents whose files are gone.")
@setting_option("extensions", "Extensions to index [default: md,markdown,txt,yaml,yml,json,py].")
@setting_option("exclude", "Folder names never indexed [default: node_modules,venv,build,...].")
@setting_option("max_file_bytes", "Skip larger files [default: 2097152].")
@EMBEDDER
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def index(
    fixtures: Path | None,
    db: Path | None,
    beir_corpus: Path | None,
    prune: bool,
    extensions: str | None,
    exclude: str | None,
    max_file_bytes: int | None,
    as_json: bool,
) -> None:
    """Index a folder (or a BEIR corpus) for search; unchanged files are not re-embedded.

    \b
    Examples:
      judge-runner index fixtures/
      judge-runner index --beir-corpus scifact/corpus.jsonl --db scifact.sqlite
    """
    if (fixtures is None) == (beir_corpus is None):
        raise UsageError("give either a FIXTURES folder or --beir-corpus FILE")
    index_job(
        settings(db=db, extensions=extensions, exclude=exclude, max_file_bytes=max_file_bytes),
        fixtures,
        beir_corpus,
        prune,
        as_json,
        printer(),
    )


@click.command()
@click.argument("query", required=False)
@db_option
@click.option(
    "--mode",
    type=click.Choice(SEARCH_MODES, case_sensitive=False),
    default="hybrid",
    show_default=True,
    help="hybrid fuses BM25 and vectors (RRF); fts and vector alone.",
)
@click.option("--limit", type=click.IntRange(1, 1000), default=None, help="Documents to return [default: 10; 100 with --queries].")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON (the search contract).")
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Batch: a BEIR queries.jsonl of {_id, text}.",
)
@click.option(
    "--trec-run",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Batch: the TREC run file to write.",
)
@EMBEDDER
def search(
    query: str | None, db: Path | None, mode: SearchMode, limit: int | None, as_json: bool, queries_file: Path | None, trec_run: Path | None
) -> None:
    """Search the index, one query or a batch.

    \b
    Examples:
      judge-runner search "drain a kubernetes node"
      judge-runner search "DEC-0054" --mode fts --json
      judge-runner search --queries queries.jsonl --trec-run run.txt --mode hybrid --limit 100
    """
    chosen = settings(db=db)
    if (queries_file is None) != (trec_run is None):
        raise UsageError("batch mode needs both --queries FILE and --trec-run FILE")
    if queries_file is not None and trec_run is not None and query is None:
        batch_search_job(chosen, queries_file, trec_run, mode, limit or 100, printer())
    elif query is not None and queries_file is None:
        search_job(chosen, query, mode, limit or 10, as_json, printer())
    else:
        raise UsageError("give either a QUERY or --queries FILE --trec-run FILE")
