"""Opening the index (SQLite or PostgreSQL), checking a corpus, indexing a folder or a BEIR corpus."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.config import Settings
from judge_runner.core.failures import IncompleteRunError, UsageError
from judge_runner.core.printer import Printer
from judge_runner.corpus.document import first_with_content
from judge_runner.corpus.walk import DEFAULT_EXCLUDES, parse_extensions, walk_corpus
from judge_runner.embed.base import TextEmbedder
from judge_runner.embed.registry import instance
from judge_runner.search.base import SearchIndex
from judge_runner.search.indexer import BeirFormatError, IndexReport, index_beir, index_tree
from judge_runner.search.postgres import PostgresIndex
from judge_runner.search.progress import IndexProgress
from judge_runner.search.redact import scrub_secrets
from judge_runner.search.sqlite import IndexAccessError, IndexBusyError, IndexMismatchError, SQLiteIndex


def open_index(settings: Settings, must_exist: bool = False) -> Any:
    """The index of ``settings``; ``must_exist`` opens an existing one read-only. Its embedder is the setting's
    (an index built by another kind is refused), else the one that built it, else the default. Raises
    UsageError when missing or unusable, or with ``must_exist`` empty; a DSN's password is scrubbed."""
    index = _open_backend(settings, must_exist)
    if must_exist and index.stats()["documents"] == 0:
        index.close()
        raise UsageError(f"the index {settings.index_label} is empty (0 documents); run `judge-runner index FIXTURES` first")
    return index


def setting_embedder(settings: Settings) -> TextEmbedder | None:
    """The embedder the ``embedder`` setting names, or None when unset."""
    return instance(settings.embedder) if settings.embedder is not None else None


def _open_backend(settings: Settings, must_exist: bool) -> Any:
    embedder = setting_embedder(settings)
    if settings.backend == "postgres":
        if not settings.dsn:
            raise UsageError("--backend postgres needs --dsn URL or DATABASE_URL")
        try:
            return PostgresIndex(settings.dsn, settings.search, embedder, readonly=must_exist, schema=settings.pg_schema)
        except IndexMismatchError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # psycopg.OperationalError and friends: never echo the DSN's password
            raise UsageError(
                f"cannot open the PostgreSQL index at {settings.index_label}: {type(exc).__name__}: "
                f"{scrub_secrets(str(exc), settings.dsn)[:300]}"
            ) from None
    if must_exist and not settings.db.is_file():
        raise UsageError(f"no index at {settings.db}; run `judge-runner index FIXTURES --db {settings.db}` first")
    try:
        return SQLiteIndex(settings.db, settings.search, embedder, readonly=must_exist)
    except (IndexMismatchError, IndexAccessError) as exc:  # each message names the file and what to do
        raise UsageError(str(exc)) from None
    except Exception as exc:  # sqlite3.DatabaseError for a file that is not an index
        raise UsageError(f"cannot open the index {settings.db}: {exc}") from None


def walk_options(settings: Settings) -> dict:
    """``{"extensions", "excludes", "max_bytes"}`` for ``walk_corpus``."""
    excludes = tuple(p.strip() for p in settings.exclude.split(",") if p.strip()) if settings.exclude is not None else DEFAULT_EXCLUDES
    return {"extensions": parse_extensions(settings.extensions), "excludes": excludes, "max_bytes": settings.max_file_bytes}


def require_folder(fixtures: Path) -> None:
    if not fixtures.is_dir():
        raise UsageError(f"fixtures folder not found: {fixtures}")


def check_corpus(settings: Settings, fixtures: Path) -> None:
    """Raise UsageError when FIXTURES holds no file to index, before the index is touched (an empty walk would
    prune every document), saying why files were skipped."""
    walked = walk_corpus(fixtures, **walk_options(settings))
    if not walked.files:
        exts = ",".join(parse_extensions(settings.extensions))
        reasons: dict[str, int] = {}
        for _, reason in walked.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        skipped = "; skipped: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) if reasons else ""
        raise UsageError(f"{fixtures} holds no file to index (extensions {exts}; hidden files and folders are skipped{skipped})")

    if first_with_content(walked.files) is None:
        raise UsageError(
            f"{fixtures} holds {len(walked.files)} file(s) to index but none has content "
            "(all empty, whitespace or front matter only, or binary)"
        )


@dataclass
class Indexed:
    """An index just brought up to date, the indexer's report, and the seconds it took."""

    index: Any
    report: Any
    elapsed: float


def _progress() -> IndexProgress:
    """Progress on stderr (a bar on a terminal, else a line every few seconds), with rate and ETA."""
    return IndexProgress()


def index_fixtures(index: SearchIndex, settings: Settings, fixtures: Path, prune: bool, printer: Printer) -> Indexed:
    """Index FIXTURES incrementally into ``index``; the caller closes the returned index. Raises UsageError
    for a path that is not a folder and IncompleteRunError on Ctrl+C (commits kept), having closed the index."""
    started = time.monotonic()
    progress = None if printer.quiet else _progress()
    try:
        report = index_tree(index, fixtures, prune=prune, progress=progress, **walk_options(settings))
    except NotADirectoryError as exc:
        index.close()
        raise UsageError(str(exc)) from None
    except IndexBusyError as exc:
        index.close()
        raise IncompleteRunError(f"{exc}; documents committed so far are kept") from None
    except KeyboardInterrupt:
        index.close()
        raise IncompleteRunError(
            "interrupted while indexing; documents committed so far are kept, run the command again to finish"
        ) from None
    finally:
        if progress is not None:
            progress.close()
    return Indexed(index, report, time.monotonic() - started)


def describe_index(report: IndexReport, elapsed: float) -> str:
    """Counts, skipped files with reasons, and notes, for people (``elapsed`` in seconds)."""
    skipped = ", ".join(f"{len(v)} {k}" for k, v in sorted(report.skipped.items())) or "none"
    text = (
        f"indexed {report.indexed}, unchanged {report.unchanged}, removed {report.removed}, "
        f"skipped: {skipped} ({report.chunks_embedded} chunks embedded in {elapsed:.1f} s)"
    )
    for reason, sources in sorted(report.skipped.items()):
        text += f"\n  skipped ({reason}): {', '.join(sources[:5])}{' ...' if len(sources) > 5 else ''}"
    for note, sources in sorted(report.notes.items()):
        text += f"\n  note: {note}: {', '.join(sources[:5])}{' ...' if len(sources) > 5 else ''}"
    return text


def index_job(settings: Settings, fixtures: Path | None, beir_corpus: Path | None, prune: bool, as_json: bool, printer: Printer) -> None:
    """The ``index`` command. Raises UsageError for a missing folder, an empty corpus or a malformed BEIR file."""
    shown = Printer(printer.out, printer.err, quiet=False)  # progress goes to stderr, also with --json
    if beir_corpus is not None:
        index = open_index(settings)
        started = time.monotonic()
        try:
            with _progress() as progress:  # on stderr, also with --json
                report = index_beir(index, beir_corpus, prune=prune, progress=progress)
        except BeirFormatError as exc:
            index.close()
            raise UsageError(str(exc)) from None
        done = Indexed(index, report, time.monotonic() - started)
    elif fixtures is not None:
        require_folder(fixtures)
        check_corpus(settings, fixtures)
        done = index_fixtures(open_index(settings), settings, fixtures, prune, shown)
    else:
        raise UsageError("give either a FIXTURES folder or --beir-corpus FILE")
    stats = done.index.stats()
    done.index.close()
    if as_json:
        printer.out(json.dumps({**done.report.as_dict(), **stats, "seconds": round(done.elapsed, 3)}, indent=2))
    else:
        printer.out(describe_index(done.report, done.elapsed))
        printer.out(f"index {settings.index_label}: {stats['documents']} documents, {stats['chunks']} chunks")
