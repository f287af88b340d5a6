"""qrels in and out: the judge's labels pooled over runs and written as TREC qrels; human qrels read from
TREC files and stored, taking precedence over the judge's.

A TREC qrels line is ``qid 0 docid grade`` (the second field, "iteration", is always 0), fields split
on whitespace, so query ids and document ids are written through :func:`encode_id`.

Pooling (:func:`pool_qrels`), for each (qid, docid) seen in the runs given:

1. a human label, when one was imported for that pair, wins;
2. otherwise the judge's labels: within one run a document returned several times (several chunks)
   counts with its best label, as in the run's own metrics (``judge_runner.measures.ir.query_metrics``); across runs
   the MEDIAN of the runs' labels, the lower middle one on a tie (``judge_runner.judging.scores.median_label``).
   The median, not the latest, so the export does not depend on the order the runs are listed in or
   on which run happened last, and one odd run cannot move a label by itself. Pool runs of ONE judge
   fingerprint: labels of different judges are not the same measurement;
3. otherwise the same judge's labels kept in the judgment cache (``cached``: e.g. a run since deleted, or
   another query set that held the query), their median;
4. otherwise, an expected source of the query that nobody labelled gets grade 3, as in the run's own
   metrics (docs/design.md, "The run file").

Human qrels also bring the pairs they label that no run returned (a qid must be in some run to be
exported), since judged-relevant documents the search missed lower the ideal DCG.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import comparability_key, legacy_key
from judge_runner.judging.scores import median_label
from judge_runner.measures.ir import qrels_metrics
from judge_runner.runs.designed import LabelDesign
from judge_runner.runs.read import RunFile, read_run_file, run_names
from judge_runner.search.trec import decode_id, encode_id

QRELS_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class QrelsError(ValueError):
    """A qrels file or the runs to pool are malformed or contradict each other; the message names the
    file and line, or the query."""


@dataclass(frozen=True)
class RunLabels:
    """One query's labels from one run: ``labels`` as ``(docid, grade 0-3)`` per returned result in
    rank order (docid = the result's source), and the query's expected sources."""

    run_id: str
    query_id: str
    query: str
    labels: Sequence[tuple[str, int]]
    expected_sources: Sequence[str] = ()


def labels_from_evaluation(run_id: str, line: Mapping) -> RunLabels:
    """:class:`RunLabels` from one ``evaluation`` line of a run file (format versions 1 and 2:
    ``queryId``, ``query``, ``expectedSources``, ``results[{source, relevance}]``). Raises QrelsError
    when a field is missing or a label is not 0-3."""
    try:
        labels = [(str(r["source"]), int(r["relevance"])) for r in line.get("results") or []]
        item = RunLabels(run_id, str(line["queryId"]), str(line["query"]), labels, tuple(line.get("expectedSources") or ()))
    except (KeyError, TypeError, ValueError) as exc:
        raise QrelsError(f"run {run_id}: an evaluation line lacks {exc}") from None
    if any(not 0 <= g <= 3 for _, g in labels):
        raise QrelsError(f"run {run_id}, query {item.query_id}: labels must be 0-3")
    return item


@dataclass
class PooledQrels:
    """``qrels``: ``{qid: {docid: grade}}``; ``origin``: ``{(qid, docid): "human" | "judge" | "expected"}``;
    ``counts``: how many exported pairs came from each origin; ``runs``: the run ids pooled; ``off_topic``:
    the query ids left out of an export."""

    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    from_cache: set[tuple[str, str]] = field(default_factory=set)
    """The judge's grades taken from the judgment cache (no pooled run labelled the pair)."""
    off_topic: list[str] = field(default_factory=list)
    """Query ids left out by :func:`export_qrels` because the runs scored them on abstention (off-topic
    queries: no metrics), so the export holds exactly the queries the runs' own means cover."""

    @property
    def counts(self) -> dict[str, int]:
        out = {"human": 0, "judge": 0, "expected": 0}
        for kind in self.origin.values():
            out[kind] += 1
        return out


def pool_qrels(
    runs: Iterable[RunLabels],
    human: Mapping[tuple[str, str], int] | None = None,
    cached: Mapping[tuple[str, str], Sequence[int]] | None = None,
) -> PooledQrels:
    """Pool the judge's labels of several runs into one set of qrels, human labels first (see the
    module docstring for the rules). ``human``: ``{(qid, docid): grade}`` (from :func:`human_labels`);
    ``cached``: ``{(qid, docid): [label, ...]}``, the same judge's labels in the judgment cache
    (:meth:`judge_runner.judging.cache.JudgmentCache.judge_labels`), the median of which grades a pair of a
    pooled query that no run labelled (``PooledQrels.from_cache``).
    Raises QrelsError when one query id stands for two different query texts across the runs (two
    query sets numbered alike), since their labels cannot be pooled."""
    human = dict(human or {})
    texts: dict[str, tuple[str, str]] = {}
    per_pair: dict[tuple[str, str], list[int]] = defaultdict(list)
    expected: dict[str, set[str]] = defaultdict(set)
    pooled = PooledQrels()
    for item in runs:
        seen = texts.setdefault(item.query_id, (item.query, item.run_id))
        if seen[0] != item.query:
            raise QrelsError(
                f"query id {item.query_id} is {seen[0]!r} in run {seen[1]} but {item.query!r} in run {item.run_id}; "
                "pool runs of one query set"
            )
        if item.run_id not in pooled.runs:
            pooled.runs.append(item.run_id)
        best: dict[str, int] = {}
        for docid, grade in item.labels:
            best[docid] = max(best.get(docid, 0), int(grade))
        for docid, grade in best.items():
            per_pair[(item.query_id, docid)].append(grade)
        expected[item.query_id].update(item.expected_sources)
    for qid in texts:
        pooled.qrels[qid] = {}
    for (qid, docid), grade in human.items():
        if qid in texts:
            pooled.qrels[qid][docid] = int(grade)
            pooled.origin[(qid, docid)] = "human"
    for (qid, docid), grades in per_pair.items():
        if (qid, docid) not in pooled.origin:
            pooled.qrels[qid][docid] = median_label(grades)
            pooled.origin[(qid, docid)] = "judge"
    for (qid, docid), stored in (cached or {}).items():
        if qid in texts and (qid, docid) not in pooled.origin and stored:
            pooled.qrels[qid][docid] = median_label(stored)
            pooled.origin[(qid, docid)] = "judge"
            pooled.from_cache.add((qid, docid))
    for qid, sources in expected.items():
        for docid in sources:
            if (qid, docid) not in pooled.origin:
                pooled.qrels[qid][docid] = 3
                pooled.origin[(qid, docid)] = "expected"
    return pooled


def write_trec_qrels(qrels: Mapping[str, Mapping[str, int]], out: TextIO) -> int:
    """Write ``qid 0 docid grade`` lines, sorted by qid then docid, ids through :func:`encode_id`.
    Returns the number of lines written."""
    n = 0
    for qid in sorted(qrels):
        for docid in sorted(qrels[qid]):
            out.write(f"{encode_id(qid)} 0 {encode_id(docid)} {int(qrels[qid][docid])}\n")
            n += 1
    return n


BEIR_HEADER = ("score", "relevance", "grade", "label")
BINARY_RESCALE = {1: 3}
"""How binary human qrels (every grade 0 or 1) are put on the judge's 0-3 scale when no ``rescale`` is
given: 1 becomes 3, so that RR(rel=2) and the ``>= 2`` agreement threshold mean "relevant" on both
sides (SciFact's and most BEIR sets' qrels are binary)."""


def read_trec_qrels(path: str | Path) -> list[tuple[str, str, int]]:
    """``(qid, docid, grade)`` from a qrels file: TREC qrels (``qid iter docid grade`` per line, ids
    decoded with :func:`decode_id`) or BEIR TSV (``query-id corpus-id score``, with or without its
    header line); fields split on whitespace, blank lines skipped, grades kept as given (any integer;
    :func:`on_judge_scale` maps them). The one reader of human qrels: ``qrels import`` and ``calibrate
    --qrels`` read a file the same way. Raises QrelsError naming the line for a line with other than 3
    or 4 fields, a grade that is not an integer, a malformed escape, or the same (qid, docid) graded
    twice with different grades (which one would be right? neither the first nor the last is taken;
    the same grade twice is a harmless repeat); and for a missing or undecodable file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QrelsError(f"cannot read qrels file {path}: {exc}") from None
    rows: dict[tuple[str, str], tuple[int, int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) == 3 and not rows and fields[2].lower() in BEIR_HEADER:
            continue  # BEIR's header line (query-id corpus-id score)
        if len(fields) not in (3, 4):
            raise QrelsError(
                f"{path}:{number}: expected 'qid iter docid grade' (TREC) or 'query-id corpus-id score' (BEIR), got {len(fields)} fields"
            )
        if not re.fullmatch(r"[-+]?\d+", fields[-1]):
            raise QrelsError(f"{path}:{number}: grade {fields[-1]!r} is not an integer")
        grade = int(fields[-1])
        try:
            qid, docid = (fields[0], fields[1]) if len(fields) == 3 else (decode_id(fields[0]), decode_id(fields[2]))
        except ValueError as exc:
            raise QrelsError(f"{path}:{number}: {exc}") from None
        earlier = rows.get((qid, docid))
        if earlier is not None and earlier[0] != grade:
            raise QrelsError(
                f"{path}:{number}: {qid} {docid} is graded twice, {earlier[0]} (line {earlier[1]}) and {grade}; "
                "keep one grade per (query, document)"
            )
        rows.setdefault((qid, docid), (grade, number))
    if not rows:
        raise QrelsError(f"{path} holds no qrels lines")
    return [(q, d, g) for (q, d), (g, _) in rows.items()]


def on_judge_scale(
    rows: Sequence[tuple[str, str, int]], rescale: Mapping[int, int] | None = None, where: str = "the qrels"
) -> list[tuple[str, str, int]]:
    """``rows`` on the judge's 0-3 scale, one rule for ``qrels import`` and ``calibrate``: with
    ``rescale`` (``{old: new}``, e.g. ``{-2: 0}`` for TREC's junk grade, ``{4: 3}``) exactly that mapping
    is applied and other grades are kept; without it, binary qrels (every grade 0 or 1) get
    :data:`BINARY_RESCALE` and graded ones are kept. ``--rescale 1=1`` keeps 0/1 labels that are on the
    0-3 scale already. Raises QrelsError when a grade is still outside 0-3, naming the first and the
    mapping that would place it (never capped or dropped silently: 4 and 3 are not the same label)."""
    if rescale:
        mapping = dict(rescale)
    else:
        mapping = BINARY_RESCALE if {g for _, _, g in rows} <= {0, 1} else {}
    mapped = [(q, d, mapping.get(g, g)) for q, d, g in rows]
    bad = [(q, d, g) for q, d, g in mapped if not 0 <= g <= 3]
    if bad:
        q, d, g = bad[0]
        hint = f"--rescale {g}=0" if g < 0 else f"--rescale {g}=3"
        raise QrelsError(
            f"{where}: grade {g} of {q} {d} is outside 0-3, the judge's scale ({len(bad)} such); map it with {hint} "
            "(repeatable, e.g. --rescale -2=0 for TREC's junk grade)"
        )
    return mapped


def import_human_qrels(cache: JudgmentCache, path: str | Path, name: str, rescale: Mapping[int, int] | None = None) -> int:
    """Read a qrels file (:func:`read_trec_qrels`) and store it in the judgment cache (``cache``: a
    :class:`judge_runner.judging.cache.JudgmentCache`) as the human qrels called ``name`` (letters, digits, ``._-``;
    at most 64), replacing an earlier import of that name. Grades go on the judge's scale by
    :func:`on_judge_scale` (``rescale``, or binary 1 -> 3), the rule ``calibrate`` follows too. Returns
    the number of labels stored. Raises QrelsError (nothing stored) on a bad name, file, or a grade
    outside 0-3 after rescaling."""
    if not QRELS_NAME_RE.fullmatch(name or ""):
        raise QrelsError(f"qrels name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    mapped = on_judge_scale(read_trec_qrels(path), rescale, str(path))
    return cache.replace_human_qrels(name, mapped)


def human_labels(cache: JudgmentCache, names: Sequence[str] | None = None) -> dict[tuple[str, str], int]:
    """``{(qid, docid): grade}`` of the stored human qrels. With several names, the earlier name in
    ``names`` wins on a pair both label (default: every stored set, in alphabetical order)."""
    rows = cache.human_qrels(names)
    order = list(names) if names is not None else sorted({r[0] for r in rows})
    rank = {n: i for i, n in enumerate(order)}
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for name, qid, docid, grade in rows:
        current = out.get((qid, docid))
        if current is None or rank[name] < current[0]:
            out[(qid, docid)] = (rank[name], grade)
    return {pair: grade for pair, (_, grade) in out.items()}


def human_grades(cache: JudgmentCache | None, names: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
    """``{query id: {docid: grade}}`` of the stored human qrels (:func:`human_labels`: ``names``, None for
    every stored set; an earlier name wins); empty without a cache (``cache`` None)."""
    if cache is None:
        return {}
    out: dict[str, dict[str, int]] = {}
    for (qid, docid), grade in human_labels(cache, list(names) if names is not None else None).items():
        out.setdefault(qid, {})[docid] = grade
    return out


def drawn_label_sets(cache: JudgmentCache | None, names: Sequence[str] | None = None) -> dict[str, set[tuple[str, str]]]:
    """``{set name: {(qid, docid)}}`` of the stored human qrels sets (``names``; None: every set) that
    ``label --budget`` drew with unequal probabilities or leaving queries out (their design, kept by
    :meth:`judge_runner.judging.cache.JudgmentCache.set_label_design`, is not ``uniform``): a sample the
    uniform-sample correction of :mod:`judge_runner.runs.corrected` must not be applied to. Empty without a
    cache."""
    if cache is None:
        return {}
    drawn = {n for n, d in cache.label_designs().items() if not d.get("uniform") and (names is None or n in names)}
    out: dict[str, set[tuple[str, str]]] = {n: set() for n in drawn}
    for name, qid, docid, _ in cache.human_qrels(sorted(drawn)) if drawn else []:
        out[name].add((qid, docid))
    return {n: pairs for n, pairs in out.items() if pairs}


def drawn_designs(cache: JudgmentCache | None, names: Sequence[str] | None = None) -> dict[str, LabelDesign]:
    """``{set name: design}`` of the stored human qrels sets (``names``; None: every set) that ``label --budget``
    drew (their design kept by :meth:`judge_runner.judging.cache.JudgmentCache.set_label_design`), each with its
    labels: what :mod:`judge_runner.runs.designed` weights them by. Empty without a cache."""
    if cache is None:
        return {}
    markers = {n: d for n, d in cache.label_designs().items() if names is None or n in names}
    pairs: dict[str, set[tuple[str, str]]] = {n: set() for n in markers}
    for name, qid, docid, _ in cache.human_qrels(sorted(markers)) if markers else []:
        pairs[name].add((qid, docid))
    return {n: LabelDesign.from_marker(n, marker, pairs[n]) for n, marker in markers.items() if pairs[n]}


def pooled_metrics(qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """nDCG@10, R@10 and RR(rel=2) of one run's queries against shared qrels (e.g. :func:`pool_qrels`), by
    :func:`judge_runner.measures.ir.qrels_metrics` (ir-measures; a source returned twice counts once, at its best
    rank). ``ranked``: ``{qid: [source, ...]}`` best first. Returns ``{qid: {name: value}}`` (ir-measures' names,
    :data:`judge_runner.measures.ir.METRIC_NAMES`) for every qid of ``ranked`` that has qrels with a grade above
    0 (0.0 for an empty answer); other qids are left out, as they cannot be scored."""
    wanted = {q: s for q, s in ranked.items() if any(g > 0 for g in (qrels.get(q) or {}).values())}
    return qrels_metrics(qrels, wanted)


def run_judge_key(run: RunFile) -> str:
    """The comparability key of a run file (:class:`judge_runner.runs.read.RunFile`): its judge fingerprint
    plus the returned model ids (format 2), else the version-1 key (``judge_fingerprint``)."""
    provenance = run.provenance
    if provenance is not None and provenance.judgeFingerprint:
        returned = run.summary.judgeReturnedModels if run.summary is not None else []
        return comparability_key(provenance.judgeFingerprint, returned)
    return legacy_key(provenance.model_dump(by_alias=True) if provenance is not None else {})


def export_qrels(
    paths: Sequence[str | Path],
    out: TextIO,
    cache: JudgmentCache | None = None,
    names: Sequence[str] | None = None,
    mixed_judges: bool = False,
) -> PooledQrels:
    """Pool the labels of the run files ``paths`` (:func:`pool_qrels`; human labels from ``cache`` first,
    sets ``names`` or all) and write them to ``out`` as TREC qrels. Off-topic queries are left out
    (``PooledQrels.off_topic``): the runs score them on abstention and give them no metrics, and qrels
    with no relevant document would make ir_measures count each as an nDCG of 0, so a mean over the export
    would not be the run's. Raises QrelsError when a file is not a
    run, holds no judged query, or (unless ``mixed_judges``) the runs were judged under different judge
    fingerprints, whose labels are not one measurement."""
    items: list[RunLabels] = []
    keys: dict[str, str] = {}
    off_topic: dict[str, None] = {}
    runs = []
    for path in paths:
        run = read_run_file(Path(path))
        if not run.is_run or not run.evaluations:
            raise QrelsError(f"{path} is not a run file with judged queries")
        runs.append(run)
    for run, name in zip(runs, run_names(runs), strict=True):  # two runs that share an old-format id stay two
        keys[name] = run_judge_key(run)
        for ev in run.evaluations:
            if ev.queryType == "off-topic" and ev.metrics is None:  # scored on abstention: in no mean of the run's metrics
                off_topic[ev.queryId] = None
                continue
            items.append(labels_from_evaluation(name, ev.line()))
    if len(set(keys.values())) > 1 and not mixed_judges:
        raise QrelsError(
            "the runs were judged under different judge fingerprints (" + ", ".join(sorted(keys)) + "); pool runs of one "
            "judge, or pass --mixed-judges"
        )
    pooled = pool_qrels(items, human_labels(cache, names) if cache is not None else None)
    pooled.off_topic = [q for q in off_topic if q not in pooled.qrels]
    write_trec_qrels(pooled.qrels, out)
    return pooled
