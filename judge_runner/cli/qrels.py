"""Command group ``qrels``: the judge's labels out as TREC qrels, human qrels in (``judge_runner.judging.qrels``)."""

from __future__ import annotations

from pathlib import Path

import click

from judge_runner.cli.cache import CACHE, open_cache
from judge_runner.cli.options import db_option, printer, settings
from judge_runner.core.failures import UsageError
from judge_runner.human.lock import cache_set_lock, holder_record
from judge_runner.judging.qrels import QRELS_NAME_RE, QrelsError, export_qrels, import_human_qrels


@click.group()
def qrels() -> None:
    """Export the judge's labels as TREC qrels, or import human qrels (which win over the judge's)."""


@qrels.command("export")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="TREC qrels file to write (qid 0 docid grade).")
@click.option("--human/--no-human", default=True, show_default=True, help="Let imported human labels win where they exist.")
@click.option("--mixed-judges", is_flag=True, help="Pool runs judged under different judge fingerprints anyway.")
@CACHE
@db_option
def qrels_export(results: tuple[Path, ...], out: Path, human: bool, mixed_judges: bool, cache: Path | None, db: Path | None) -> None:
    """Pool the labels of the run files RESULTS into TREC qrels.

    \b
    Per (query, document): a human label wins; else the median of the runs' labels (a document
    returned several times counts with its best label); else an unlabelled expected source gets 3.
    Off-topic queries are left out: the runs score them on abstention, not with these metrics.
    ir_measures.read_trec_qrels (or trec_eval) reads the file; ids are %-escaped like TREC run files.
    """
    store = open_cache(cache, db) if human and (cache or _default_cache_exists(db)) else None
    try:
        with open(out, "w", encoding="utf-8") as handle:
            pooled = export_qrels([str(p) for p in results], handle, store, mixed_judges=mixed_judges)
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
    help="Map a grade of the qrels onto the judge's 0-3 scale, e.g. -2=0 (TREC's junk grade) or 4=3; repeatable. "
    "Without it binary qrels (0/1) become 1=3 and graded ones are kept; a grade still outside 0-3 is refused.",
)
"""``--rescale OLD=NEW`` of ``qrels import`` and ``calibrate``: one rule for both
(:func:`judge_runner.judging.qrels.on_judge_scale`)."""


@qrels.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Name of this set of human labels (letters, digits, . _ -); a new import replaces it.")
@RESCALE
@CACHE
@db_option
def qrels_import(file: Path, name: str, rescale: dict[int, int], cache: Path | None, db: Path | None) -> None:
    """Store the human qrels in FILE (TREC qid iter docid grade, or BEIR TSV) in the judgment cache.

    \b
    Later runs use a human label instead of asking the judge wherever one exists for a (query id,
    source) pair, and say how many labels were human. A pair graded twice with different grades is
    refused, as calibrate --qrels refuses it; grades go on 0-3 as --rescale says. A set that
    `judge-runner label --name NAME` is writing into this cache is refused (exit 2), naming that process.
    """
    if not QRELS_NAME_RE.fullmatch(name):
        raise UsageError(f"qrels name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    with open_cache(cache, db, must_exist=False) as store:
        store.check()  # an import replaces a set: never into a damaged file (exit 3, as evaluate says of it)
        lock = cache_set_lock(store.path, name)
        lock.acquire(holder_record("qrels import", file=str(file)))
        try:
            stored = import_human_qrels(store, file, name, rescale)
        except QrelsError as exc:
            raise UsageError(str(exc)) from None
        finally:
            lock.release()
    printer().out(f"imported {stored} human labels as {name!r}")
