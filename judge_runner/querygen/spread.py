"""Spread over the corpus: how many queries each folder, format and language should get
(:func:`allocate`) and how a written set compares (:func:`measure_spread`). A query counts under its
first expected source; off-topic queries are not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from judge_runner.core.models import Query
from judge_runner.core.query_card import Spread, SpreadRow
from judge_runner.querygen.profile import NO_LANGUAGE, ROOT_FOLDER, CorpusProfile, folder_of

UNDER_SHARE = 0.10
"""A group holding at least this share of the corpus is warned about under half its share of queries."""
MIN_SPREAD_QUERIES = 8
"""Fewer on-topic queries than this give no warning."""


def allocate(counts: Mapping[str, int], slots: int, floor: int = 1) -> dict[str, int]:
    """``slots`` shared in proportion to ``counts``, each group with files getting at least ``floor``; the rest
    by the largest remainder method (Hamilton's). Short of slots, the largest groups get one each. Sums to
    ``slots``."""
    groups = sorted((g for g, n in counts.items() if n > 0), key=lambda g: (-counts[g], g))
    out = dict.fromkeys(counts, 0)
    if slots <= 0 or not groups:
        return out
    if floor * len(groups) > slots:
        out.update({g: 1 for g in groups[:slots]})
        return out
    fixed: dict[str, int] = {}
    free = list(groups)
    quotas: dict[str, float] = {}
    while free:
        remaining = slots - sum(fixed.values())
        total = sum(counts[g] for g in free)
        quotas = {g: remaining * counts[g] / total for g in free}
        small = [g for g in free if quotas[g] < floor]
        if not small:
            break
        for g in small:
            fixed[g] = floor
        free = [g for g in free if g not in small]
    base = {g: int(quotas[g]) for g in free}
    left = slots - sum(fixed.values()) - sum(base.values())
    for g in sorted(free, key=lambda g: (-(quotas[g] - base[g]), -counts[g], g))[:left]:
        base[g] += 1
    out.update(fixed)
    out.update(base)
    if left > 0 and not free:  # every group got its floor and slots are left: the largest take them
        for k in range(left):
            out[groups[k % len(groups)]] += 1
    return out


def _label(kind: str, name: str) -> str:
    return f"{name}/" if kind == "folders" and name != ROOT_FOLDER else name


def _rows(corpus: Counter[str], queries: Counter[str], total_files: int, total_queries: int) -> list[SpreadRow]:
    names = sorted(set(corpus) | set(queries), key=lambda n: (-corpus.get(n, 0), -queries.get(n, 0), n))
    return [
        SpreadRow(
            name=n,
            corpusFiles=corpus.get(n, 0),
            corpusShare=round(corpus.get(n, 0) / total_files, 4) if total_files else 0.0,
            queries=queries.get(n, 0),
            queryShare=round(queries.get(n, 0) / total_queries, 4) if total_queries else 0.0,
        )
        for n in names
    ]


def _warnings(kind: str, rows: Sequence[SpreadRow], total_queries: int) -> list[str]:
    out = []
    for row in rows:
        if kind == "languages" and row.name == NO_LANGUAGE:
            continue
        what = _label(kind, row.name)
        said = f"{row.queryShare:.0%} ({row.queries} of {total_queries}) of the on-topic queries"
        if row.corpusShare >= UNDER_SHARE and row.queryShare < row.corpusShare / 2:
            out.append(f"{what} holds {row.corpusShare:.0%} of the files but gets {said}")
        elif row.queryShare > max(2 * row.corpusShare, row.corpusShare + 0.25):
            out.append(f"{what} holds {row.corpusShare:.0%} of the files but gets {said}")
    return out


def measure_spread(queries: Sequence[Query], profile: CorpusProfile) -> Spread:
    """The on-topic ``queries`` by folder, format and language against the corpus, with a warning per group
    under-represented (see :data:`UNDER_SHARE`) or over it (twice its share and 25 points above)."""
    firsts = [q.expectedSources[0] for q in queries if q.queryType != "off-topic" and q.expectedSources]
    counted: dict[str, Counter[str]] = {"folders": Counter(), "formats": Counter(), "languages": Counter()}
    for source in firsts:
        file = profile.files.get(source)
        counted["folders"][folder_of(source)] += 1
        counted["formats"][file.format if file else source.rsplit(".", 1)[-1].lower()] += 1
        counted["languages"][file.language if file else NO_LANGUAGE] += 1
    total = len(profile.files)
    corpus = {"folders": profile.counts("folder"), "formats": profile.counts("format"), "languages": profile.counts("language")}
    rows = {kind: _rows(corpus[kind], counted[kind], total, len(firsts)) for kind in counted}
    warnings = [w for kind in rows for w in _warnings(kind, rows[kind], len(firsts))] if len(firsts) >= MIN_SPREAD_QUERIES else []
    return Spread(
        onTopicQueries=len(firsts), folders=rows["folders"], formats=rows["formats"], languages=rows["languages"], warnings=warnings
    )
