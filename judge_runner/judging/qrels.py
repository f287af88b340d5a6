"""qrels in and out: the judge's labels pooled over runs and written as TREC qrels (``qid 0 docid grade``,
ids through :func:`encode_id`); people's qrels read and stored. For each pair, :func:`pool_qrels` takes a
person's grade, else the lower median of the runs' best labels, else the median of the same judge's cached
labels, else 3 for an unlabelled expected source. See docs/judge-protocol.md, "qrels in and out".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import comparability_key, legacy_key
from judge_runner.judging.scores import median_label
from judge_runner.measures.ir import qrels_metrics
from judge_runner.runs.designed import LabelDesign
from judge_runner.runs.read import RunFile, RunLines, read_run_file, run_names
from judge_runner.search.trec import decode_id, encode_id

QRELS_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class QrelsError(ValueError):
    """A qrels file or the runs to pool are malformed or contradict each other; the message says where."""


@dataclass(frozen=True)
class RunLabels:
    """One query's labels from one run: ``(source, label)`` per result in rank order."""

    run_id: str
    query_id: str
    query: str
    labels: Sequence[tuple[str, int]]
    expected_sources: Sequence[str] = ()


def labels_from_evaluation(run_id: str, line: Mapping) -> RunLabels:
    """:class:`RunLabels` from one ``evaluation`` line (formats 1 and 2): the judge's labels, ``judgeLabel``
    where a person's grade won (none when the line kept none). Raises QrelsError when a field is missing or a
    label is not 0-3."""
    try:
        labels = [
            (str(r["source"]), int(r["judgeLabel"] if r.get("labelOrigin") == "human" else r["relevance"]))
            for r in line.get("results") or []
            if r.get("labelOrigin") != "human" or isinstance(r.get("judgeLabel"), int)
        ]
        item = RunLabels(run_id, str(line["queryId"]), str(line["query"]), labels, tuple(line.get("expectedSources") or ()))
    except (KeyError, TypeError, ValueError) as exc:
        raise QrelsError(f"run {run_id}: an evaluation line lacks {exc}") from None
    if any(not 0 <= g <= 3 for _, g in labels):
        raise QrelsError(f"run {run_id}, query {item.query_id}: labels must be 0-3")
    return item


@dataclass
class PooledQrels:
    """``qrels``: ``{qid: {docid: grade}}``; ``origin``: ``{(qid, docid): "human" | "judge" | "expected"}``."""

    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    from_cache: set[tuple[str, str]] = field(default_factory=set)
    """Pairs graded from the judgment cache's labels."""
    off_topic: list[str] = field(default_factory=list)
    """Off-topic query ids left out of an export: the runs score them on abstention."""

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
    """Pool several runs' labels into one set of qrels (rules in the module docstring). ``human``: people's
    ``{(qid, docid): grade}``; ``cached``: the same judge's cached ``{(qid, docid): [label, ...]}``. Raises
    QrelsError when one query id stands for two query texts across the runs."""
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
    """Write sorted ``qid 0 docid grade`` lines; returns how many."""
    n = 0
    for qid in sorted(qrels):
        for docid in sorted(qrels[qid]):
            out.write(f"{encode_id(qid)} 0 {encode_id(docid)} {int(qrels[qid][docid])}\n")
            n += 1
    return n


BEIR_HEADER = ("score", "relevance", "grade", "label")
BINARY_RESCALE = {1: 3}
"""Binary qrels (every grade 0 or 1) on the 0-3 scale without ``rescale``: 1 becomes 3, so RR(rel=2) and
the ``>= 2`` agreement threshold mean "relevant" on both sides."""


def read_trec_qrels(path: str | Path) -> list[tuple[str, str, int]]:
    """``(qid, docid, grade)`` from TREC qrels or BEIR TSV, grades as given. Raises QrelsError naming the
    line for other than 3 or 4 fields, a grade that is not an integer, a malformed escape, or a pair graded
    twice differently; and for a missing or undecodable file."""
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
    """``rows`` on the 0-3 scale: ``rescale`` (``{old: new}``) exactly, else :data:`BINARY_RESCALE` for
    binary qrels. Raises QrelsError when a grade is still outside 0-3, naming the mapping that would place it."""
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


def import_human_qrels(
    cache: JudgmentCache,
    path: str | Path,
    name: str,
    rescale: Mapping[int, int] | None = None,
    texts: Mapping[str, str] | None = None,
) -> int:
    """Store a qrels file on the 0-3 scale as the set ``name`` (letters, digits, ``._-``; at most 64),
    replacing it, each grade with its query's text from ``texts`` (``{qid: text}``; None: unknown, bound by
    the first ``evaluate`` that applies it, :meth:`PeopleGrades.bind`); returns the number of grades stored.
    Raises QrelsError, storing nothing, on a bad name, file, or grade, or a qid ``texts`` lacks."""
    if not QRELS_NAME_RE.fullmatch(name or ""):
        raise QrelsError(f"qrels name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    mapped = on_judge_scale(read_trec_qrels(path), rescale, str(path))
    if texts is not None:
        missing = sorted({q for q, _, _ in mapped if q not in texts})
        if missing:
            raise QrelsError(f"{path}: query ids {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} are not in the queries given")
    return cache.replace_human_qrels(name, mapped, texts)


def left_out_warning(what: str, count: int, qids: Iterable[str], shown: int = 3) -> str:
    """The warning that ``count`` people's grades of ``what`` were given to another text of the queries ``qids``:
    the first ``shown`` ids, then how many more."""
    ids = sorted(set(qids))
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return (
        f"warning: {count} people's grades of {what} left out: given to another query under the same id "
        f"({', '.join(ids[:shown])}{more}); grades follow the query text"
    )


@dataclass
class PeopleGrades:
    """People's stored grades, applied to a query by its id AND text: a grade stored with another text (the id
    reused by a later query set) is left out and counted in ``skipped`` (per set); a grade stored without a text
    (a TREC qrels file imported alone, or stored before texts were kept) applies by id until bound to one.
    ``rows``: ``(set, qid, docid, grade, text or None)``; an earlier set in ``order`` wins a pair."""

    rows: Sequence[tuple[str, str, str, int, str | None]] = ()
    order: Sequence[str] = ()
    skipped: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    _by_qid: dict[str, list[tuple[str, str, int, str | None]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        rank = {n: i for i, n in enumerate(self.order)}
        for name, qid, docid, grade, text in sorted(self.rows, key=lambda r: rank.get(r[0], len(rank))):
            self._by_qid.setdefault(qid, []).append((name, docid, grade, text))

    def for_query(self, qid: str, text: str) -> dict[str, int]:
        """``{docid: grade}`` of the query ``qid`` whose text is ``text``."""
        out: dict[str, int] = {}
        for name, docid, grade, stored in self._by_qid.get(qid, ()):
            if stored is not None and stored != text:
                self.skipped.setdefault(name, set()).add((qid, docid))
            elif docid not in out:
                out[docid] = grade
        return out

    def matching(self, queries: Mapping[str, str]) -> dict[tuple[str, str], int]:
        """``{(qid, docid): grade}`` of the queries ``{qid: text}``."""
        return {(qid, docid): g for qid, text in queries.items() for docid, g in self.for_query(qid, text).items()}

    def warnings(self) -> list[str]:
        """One line per set with grades left out for a text mismatch."""
        return [left_out_warning(f"set {name!r}", len(pairs), {q for q, _ in pairs}) for name, pairs in sorted(self.skipped.items())]

    def unbound(self, queries: Mapping[str, str]) -> dict[str, str]:
        """The queries of ``queries`` some grade without a text applies to."""
        return {q: t for q, t in queries.items() if any(r[3] is None for r in self._by_qid.get(q, ()))}


def people_grades(cache: JudgmentCache | None, names: Sequence[str] | None = None) -> PeopleGrades:
    """The stored sets ``names`` (default: every set, alphabetically) as :class:`PeopleGrades`; none without a cache."""
    if cache is None:
        return PeopleGrades()
    rows = cache.human_rows(names)
    return PeopleGrades(rows, list(names) if names is not None else sorted({r[0] for r in rows}))


def human_labels(
    cache: JudgmentCache, names: Sequence[str] | None = None, queries: Mapping[str, str] | None = None
) -> dict[tuple[str, str], int]:
    """``{(qid, docid): grade}`` of people's stored qrels that apply to ``queries`` (``{qid: text}``,
    :class:`PeopleGrades`; None: every grade by id, whatever its text); an earlier name in ``names`` (default:
    every set, alphabetically) wins."""
    grades = people_grades(cache, names)
    if queries is not None:
        return grades.matching(queries)
    return {(qid, docid): g for qid, rows in grades._by_qid.items() for _, docid, g, _ in reversed(rows)}


def human_grades(
    cache: JudgmentCache | None, names: Sequence[str] | None = None, queries: Mapping[str, str] | None = None
) -> dict[str, dict[str, int]]:
    """:func:`human_labels` by query id; empty without a cache."""
    if cache is None:
        return {}
    out: dict[str, dict[str, int]] = {}
    for (qid, docid), grade in human_labels(cache, list(names) if names is not None else None, queries).items():
        out.setdefault(qid, {})[docid] = grade
    return out


def drawn_label_sets(cache: JudgmentCache | None, names: Sequence[str] | None = None) -> dict[str, set[tuple[str, str]]]:
    """``{set name: {(qid, docid)}}`` of the sets ``label --budget`` drew with a design that is not
    ``uniform``: the uniform-sample correction must not be applied to them. Empty without a cache."""
    if cache is None:
        return {}
    drawn = {n for n, d in cache.label_designs().items() if not d.get("uniform") and (names is None or n in names)}
    out: dict[str, set[tuple[str, str]]] = {n: set() for n in drawn}
    for name, qid, docid, _ in cache.human_qrels(sorted(drawn)) if drawn else []:
        out[name].add((qid, docid))
    return {n: pairs for n, pairs in out.items() if pairs}


def drawn_designs(
    cache: JudgmentCache | None, names: Sequence[str] | None = None, queries: Mapping[str, str] | None = None
) -> dict[str, LabelDesign]:
    """``{set name: design}`` of the sets ``label --budget`` drew, with their grades (those given to another text
    of a query of ``queries``, ``{qid: text}``, left out: :class:`PeopleGrades`). Empty without a cache."""
    if cache is None:
        return {}
    markers = {n: d for n, d in cache.label_designs().items() if names is None or n in names}
    pairs: dict[str, set[tuple[str, str]]] = {n: set() for n in markers}
    for name, qid, docid, _, text in cache.human_rows(sorted(markers)) if markers else []:
        if text is None or queries is None or queries.get(qid, text) == text:
            pairs[name].add((qid, docid))
    return {n: LabelDesign.from_marker(n, marker, pairs[n]) for n, marker in markers.items() if pairs[n]}


def pooled_metrics(qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """``{qid: {metric: value}}`` by ir-measures for the qids of ``ranked`` (``{qid: [source, ...]}``, best
    first) whose qrels hold a grade above 0; the others cannot be scored."""
    wanted = {q: s for q, s in ranked.items() if any(g > 0 for g in (qrels.get(q) or {}).values())}
    return qrels_metrics(qrels, wanted)


def run_judge_key(run: RunFile) -> str:
    """A run's comparability key: its judge fingerprint plus the returned model ids, else the format-1 key."""
    provenance = run.provenance
    if provenance is not None and provenance.judgeFingerprint:
        returned = run.summary.judgeReturnedModels if run.summary is not None else []
        return comparability_key(provenance.judgeFingerprint, returned)
    return legacy_key(provenance.model_dump(by_alias=True) if provenance is not None else {})


def export_qrels(
    paths: Sequence[str | Path],
    out: TextIO,
    cache: JudgmentCache | None = None,
    mixed_judges: bool = False,
    say: Callable[[str], None] | None = None,
    *,
    people: str = "run",
) -> PooledQrels:
    """Pool the run files ``paths`` and write TREC qrels to ``out``, off-topic queries left out. People's grades
    (``people``): ``run``, the lines' and ``cache``'s of the sets the runs were scored with
    (:func:`run_people_sets`); ``all``, the lines' and every set stored now; ``none``, the judge's labels only.
    ``say`` hears :meth:`PeopleGrades.warnings`. Raises QrelsError when a file is not a run, holds no judged
    query, the runs were scored with different sets (with ``run``), or (unless ``mixed_judges``) the runs have
    different judge fingerprints."""
    items: list[RunLabels] = []
    keys: dict[str, str] = {}
    off_topic: dict[str, None] = {}
    stated: dict[tuple[str, str], int] = {}  # the grades people gave in the lines
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
            line = ev.line()
            items.append(labels_from_evaluation(name, line))
            for r in line.get("results") or []:
                if r.get("labelOrigin") == "human" and people != "none":
                    stated[(str(line["queryId"]), str(r["source"]))] = int(r["relevance"])
    if len(set(keys.values())) > 1 and not mixed_judges:
        raise QrelsError(
            "the runs were judged under different judge fingerprints (" + ", ".join(sorted(keys)) + "); pool runs of one "
            "judge, or pass --mixed-judges"
        )
    grades = people_grades(cache, _one_choice(runs)) if people == "run" else people_grades(cache if people == "all" else None)
    pooled = pool_qrels(items, {**stated, **grades.matching({item.query_id: item.query for item in items})})
    if say is not None:
        for warning in grades.warnings():
            say(warning)
    pooled.off_topic = [q for q in off_topic if q not in pooled.qrels]
    write_trec_qrels(pooled.qrels, out)
    return pooled


def run_people_sets(run: RunLines) -> tuple[str, ...] | None:
    """The sets of people's grades ``run`` was scored with, from its ``run_start`` config: the names of
    ``humanQrels`` (``--human-qrels``), none for a run without a judgment cache (``judgmentCache`` null), None
    (every set) when the file does not say."""
    config = run.run_start.config if run.run_start is not None else {}
    if "judgmentCache" in config and config["judgmentCache"] is None:
        return ()
    names = config.get("humanQrels")
    return tuple(sorted(str(n) for n in names)) if isinstance(names, list) else None


def _one_choice(runs: Sequence[RunLines]) -> tuple[str, ...] | None:
    """The runs' common :func:`run_people_sets`; QrelsError when they differ."""
    choices = {run_people_sets(run) for run in runs}
    if len(choices) > 1:
        said = sorted("every set" if c is None else ", ".join(c) or "none" for c in choices)
        raise QrelsError(
            f"the runs were scored with different sets of people's grades ({'; '.join(said)}); export them one by one, "
            "or pass --all-human or --no-human"
        )
    return next(iter(choices))
