"""The options that choose which search systems a run judges (issue 12): external command and HTTP
searches, TREC runs in, several modes or configurations side by side; read back by :func:`systems_spec`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from judge_runner.app.inputs import systems_spec as make_systems_spec
from judge_runner.cli.numbers import FiniteFloatRange
from judge_runner.cli.options import F, _options


def search_adapter_options(f: F) -> F:
    """--search-command, --search-url, --search-header, --search-fields, --search-timeout, --corpus: judge a
    search judge-runner does not run itself (see judge_runner/search/systems.py). Read with :func:`systems_spec`."""
    return _options(
        f,
        [
            click.option(
                "--search-command",
                multiple=True,
                metavar="'CMD {query} --limit {limit}'",
                help="Judge a search run as a command (no shell; {query}, {limit}, {mode} replaced; without {query} the "
                "query goes to stdin). It must print JSON on stdout: the results best first, "
                '[{"source": "docs/a.md", "snippet": "text shown", "score": 12.5}, ...], or {"results": [...], '
                '"confident": false} to abstain; also read: id/docid/_id for source, text for snippet, anchor or '
                "title, lineStart, lineEnd (other shapes: --search-fields). The first --search-limit results are read, in its "
                "order; a document listed twice keeps its first place. Repeatable.",
            ),
            click.option(
                "--search-url",
                multiple=True,
                metavar="URL",
                help='Judge a search behind an HTTP endpoint: POST {"query": ..., "limit": 10, "mode": "hybrid"} as JSON; '
                "it answers 200 with the JSON --search-command prints (the results best first, each with source, "
                "snippet and score; or an object with results and confident). Repeatable.",
            ),
            click.option(
                "--search-header",
                multiple=True,
                metavar="NAME=env:VAR",
                help="Header for --search-url; NAME=env:VAR reads a token from the environment (never logged). Repeatable.",
            ),
            click.option(
                "--search-fields",
                default=None,
                metavar="KEY=PATH,...",
                help="Where the results are in the reply: results, id, text, score, anchor, lineStart, lineEnd "
                "(e.g. results=hits.hits,id=_id,text=_source.body,score=_score).",
            ),
            click.option(
                "--search-timeout",
                type=FiniteFloatRange(min=0, min_open=True),
                default=None,
                help="Seconds for one external search exchange, start to last byte; retries stop at 4x this [default: --timeout].",
            ),
            click.option(
                "--corpus",
                type=click.Path(exists=True, path_type=Path),
                default=None,
                help="The documents behind external results and --run docids, by id: a fixtures folder or a BEIR "
                "corpus.jsonl. The judge reads a document held here by the same rule as the built-in search's, "
                "whatever text the search returned (that text is its snippet) [default for generate-and-evaluate: --fixtures].",
            ),
        ],
    )


def compare_options(f: F) -> F:
    """--run and --compare (``evaluate`` only). Read with :func:`systems_spec`."""
    return _options(
        f,
        [
            click.option(
                "--run",
                "runs",
                multiple=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                metavar="RUN.trec",
                help="Judge an existing TREC run file (qid Q0 docid rank score tag); needs --corpus. Repeatable.",
            ),
            click.option(
                "--compare",
                default=None,
                metavar="A.toml,B.toml",
                help="Judge the search of each configuration file ([search] table, search_mode, or [search.external]) "
                "side by side on the same queries; the first is the reference.",
            ),
        ],
    )


def systems_spec(flags: dict[str, Any]) -> Any:
    """Take the search-system flags out of ``flags`` and return a ``SystemsSpec``
    (:func:`judge_runner.app.inputs.systems_spec`), or None when none was given. ``--search-mode`` stays
    in ``flags``: the settings read it (several modes too) as they read it from any other source, and
    :func:`judge_runner.app.inputs.resolve_systems` makes the systems of all of them."""
    compare = flags.pop("compare", None)
    configs = tuple(Path(p.strip()) for p in compare.split(",") if p.strip()) if compare else ()
    missing = [str(p) for p in configs if not p.is_file()]
    if missing:
        raise click.UsageError(f"--compare: no such configuration file: {', '.join(missing)}")
    return make_systems_spec(
        configs=configs,
        commands=tuple(flags.pop("search_command", ()) or ()),
        urls=tuple(flags.pop("search_url", ()) or ()),
        runs=tuple(flags.pop("runs", ()) or ()),
        headers=tuple(flags.pop("search_header", ()) or ()),
        fields=flags.pop("search_fields", None),
        timeout=flags.pop("search_timeout", None),
        corpus=flags.pop("corpus", None),
    )
