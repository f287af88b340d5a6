"""Command group ``qrels``: the judge's labels out as TREC qrels, people's grades in."""

from __future__ import annotations

from pathlib import Path

import click

from judge_runner.app.inputs import query_texts
from judge_runner.cli.cache import CACHE, open_cache
from judge_runner.cli.options import db_option, printer, settings
from judge_runner.core.failures import UsageError
from judge_runner.human.lock import cache_set_lock, holder_record
from judge_runner.judging.qrels import QRELS_NAME_RE, QrelsError, export_qrels, import_human_qrels


@click.group()
def qrels() -> None:
    """Export the judge's labels as TREC qrels, or import people's grades (which win over them)."""


@qrels.command("export")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="TREC qrels file to write.")
@click.option("--human", "human", flag_value="run", default=True, help="People's grades of the sets the runs used win [default].")
@click.option("--all-human", "human", flag_value="all", help="People's grades of every set stored now win.")
@click.option("--no-human", "human", flag_value="none", help="The judge's labels only.")
@click.option("--mixed-judges", is_flag=True, help="Pool the runs of different judges anyway.")
@CACHE
@db_option
def qrels_export(results: tuple[Path, ...], out: Path, human: str, mixed_judges: bool, cache: Path | None, db: Path | None) -> None:
    """Pool the labels of the run files RESULTS into TREC qrels.

    \b
    Per (query, document): a person's grade, else the median label, else 3 for an expected source.
      judge-runner qrels export quality-results/*.jsonl --out judged.qrels
    """
    store = open_cache(cache, db) if human != "none" and (cache or _default_cache_exists(db)) else None
    try:
        with open(out, "w", encoding="utf-8") as handle:
            pooled = export_qrels([str(p) for p in results], handle, store, mixed_judges=mixed_judges, say=printer().err, people=human)
    except (QrelsError, OSError) as exc:
        out.unlink(missing_ok=True)
        raise UsageError(str(exc)) from None
    finally:
        if store is not None:
            store.close()
    counts = pooled.counts
    left_out = (
        f"; {len(pooled.off_topic)} off-topic queries left out (scored on abstention, in none of the runs' metrics)"
        if pooled.off_topic
        else ""
    )
    printer().out(
        f"wrote {sum(counts.values())} labels of {len(pooled.qrels)} queries from {len(pooled.runs)} runs to {out} "
        f"({counts['judge']} judge, {counts['human']} human, {counts['expected']} expected sources){left_out}"
    )


def _default_cache_exists(db: Path | None) -> bool:

    path = settings(db=db).cache_path
    return path is not None and path.is_file()


def _rescale(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[int, int]:
    out: dict[int, int] = {}
    for value in values:
        try:
            old, new = (int(v) for v in value.split("=", 1))
        except ValueError:
            raise click.BadParameter(f"{value!r} is not OLD=NEW (e.g. 1=3, -2=0)") from None
        out[old] = new
    return out


RESCALE = click.option(
    "--rescale",
    multiple=True,
    callback=_rescale,
    metavar="OLD=NEW",
    help="Put a grade on the 0-3 scale, e.g. -2=0 or 4=3; repeatable.",
)
"""``--rescale OLD=NEW`` of ``qrels import`` and ``calibrate`` (:func:`judge_runner.judging.qrels.on_judge_scale`)."""


@qrels.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Name of the set (letters, digits, . _ -); an import replaces it.")
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The queries graded (query set JSON, run file, or BEIR queries); grades follow their text.",
)
@RESCALE
@CACHE
@db_option
def qrels_import(file: Path, name: str, queries_file: Path | None, rescale: dict[int, int], cache: Path | None, db: Path | None) -> None:
    """Store people's grades from FILE (TREC qrels or BEIR TSV) in the judgment cache.

    \b
    Later runs use a person's grade instead of asking the judge, for the query
    with that id and text. Without --queries the first evaluate binds the text.
      judge-runner qrels import team.qrels --name team --queries q.json
    """
    if not QRELS_NAME_RE.fullmatch(name):
        raise UsageError(f"qrels name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    texts = query_texts(queries_file) if queries_file is not None else None
    with open_cache(cache, db, must_exist=False) as store:
        store.check()  # an import replaces a set: never into a damaged file (exit 3, as evaluate says of it)
        lock = cache_set_lock(store.path, name)
        lock.acquire(holder_record("qrels import", file=str(file)))
        try:
            stored = import_human_qrels(store, file, name, rescale, texts)
        except QrelsError as exc:
            raise UsageError(str(exc)) from None
        finally:
            lock.release()
    printer().out(f"imported {stored} human labels as {name!r}")
