"""Commands ``index`` and ``search``."""

from __future__ import annotations

from pathlib import Path

import click

from judge_runner.app.indexing import index_job
from judge_runner.app.searching import batch_search_job, search_job
from judge_runner.cli.options import EMBEDDER, db_option, printer, setting_option, settings
from judge_runner.core.failures import UsageError
from judge_runner.core.models import SEARCH_MODES


@click.command()
@click.argument("fixtures", type=click.Path(path_type=Path), required=False)
@db_option
@click.option(
    "--beir-corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Index a BEIR-format corpus.jsonl instead of a folder: each {_id, title, text} record is one document.",
)
@click.option("--prune/--no-prune", default=True, show_default=True, help="Remove documents whose files are gone or no longer match.")
@setting_option(
    "extensions", "Comma-separated extensions to index [default: md,markdown,txt,yaml,yml,json,py; env JUDGE_RUNNER_EXTENSIONS]."
)
@setting_option(
    "exclude",
    "Comma-separated folder names never indexed [default: node_modules,__pycache__,venv,.venv,build,dist,site-packages; env JUDGE_RUNNER_EXCLUDE].",
)
@setting_option("max_file_bytes", "Skip larger files, with a reason [default: 2097152].")
@EMBEDDER
@click.option("--json", "as_json", is_flag=True, help="Print the outcome counts as JSON.")
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
    """Index a folder of notes, docs, configs and code (or a BEIR corpus) for search.

    \b
    Incremental: unchanged files are not re-embedded; with --prune (the default) documents whose file
    is gone are removed. Hidden files and folders are skipped; a file that cannot be read is skipped
    with its reason and never stops the index.
    \b
    Embedder: a new index is built with openvino (all-MiniLM-L6-v2 exported once to ONNX into
    ~/.cache/judge-runner, run by OpenVINO in bf16 where it pays, checked at load: the torch model's vectors at
    about 2.4x its speed, a cold search in about a second). An index keeps the embedder that built it
    and is opened with it when nothing chooses one; --embedder (or JUDGE_RUNNER_EMBEDDER, or embedder
    in judge-runner.toml) torch, onnx, onnx-int8 or openvino chooses for a new index (an index built by
    another is refused). See docs/builtin-search.md#embedders.
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
    help="hybrid = BM25 and vectors fused by RRF; fts = BM25 only; vector = embeddings only.",
)
@click.option("--limit", type=click.IntRange(1, 1000), default=None, help="Documents to return [default: 10; 100 with --queries].")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON (the search contract).")
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Batch mode: a JSON-lines file of {_id, text} queries (BEIR queries.jsonl).",
)
@click.option(
    "--trec-run",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Batch mode: write a TREC run file (qid Q0 docid rank score tag) for trec_eval or ir-measures.",
)
@EMBEDDER
def search(
    query: str | None, db: Path | None, mode: str, limit: int | None, as_json: bool, queries_file: Path | None, trec_run: Path | None
) -> None:
    """Search the index, one query or a batch.

    \b
    The query is embedded by the embedder that built the index, unless --embedder (or
    JUDGE_RUNNER_EMBEDDER) names one; an index built by another is then refused.
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
