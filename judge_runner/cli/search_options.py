"""The options that choose which search systems a run judges (docs/external-search.md); read back by
:func:`systems_spec`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from judge_runner.app.inputs import systems_spec as make_systems_spec
from judge_runner.cli.numbers import FiniteFloatRange
from judge_runner.cli.options import F, _options


def search_adapter_options(f: F) -> F:
    """The options that judge a search judge-runner does not run itself."""
    return _options(
        f,
        [
            click.option(
                "--search-command",
                multiple=True,
                metavar="'[NAME=]CMD {query} --limit {limit}'",
                help="Judge a search command ({query}, {limit}, {mode} replaced) printing, best first, "
                '[{"source": "docs/a.md", "snippet": "text shown", "score": 12.5}, ...] or {"results": [...], '
                '"confident": false}. NAME= names its system. Repeatable.',
            ),
            click.option(
                "--search-url",
                multiple=True,
                metavar="[NAME=]URL",
                help='Judge the search at URL: POST {"query": ..., "limit": 10, "mode": "hybrid"}; it answers '
                "source, snippet, score (and confident) as --search-command prints. Repeatable.",
            ),
            click.option(
                "--search-header",
                multiple=True,
                metavar="NAME=env:VAR",
                help="Header for --search-url, its value read from env VAR. Repeatable.",
            ),
            click.option(
                "--search-fields",
                default=None,
                metavar="KEY=PATH,...",
                help="Where the reply holds its fields, e.g. results=hits.hits,id=_id.",
            ),
            click.option(
                "--search-timeout",
                type=FiniteFloatRange(min=0, min_open=True),
                default=None,
                help="Seconds per external search call [default: --timeout].",
            ),
            click.option(
                "--corpus",
                type=click.Path(exists=True, path_type=Path),
                default=None,
                help="The documents external results name: a folder or corpus.jsonl.",
            ),
        ],
    )


def compare_options(f: F) -> F:
    """--run and --compare (``evaluate`` only)."""
    return _options(
        f,
        [
            click.option(
                "--run",
                "runs",
                multiple=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                metavar="RUN.trec",
                help="Judge a TREC run file; needs --corpus. Repeatable.",
            ),
            click.option(
                "--compare",
                default=None,
                metavar="A.toml,B.toml",
                help="Judge each config file's search side by side; the first is the reference.",
            ),
        ],
    )


def systems_spec(flags: dict[str, Any]) -> Any:
    """Take the search-system flags out of ``flags`` as a ``SystemsSpec`` (None when none was given).
    ``--search-mode`` stays: the settings read it, as from any other source."""
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
