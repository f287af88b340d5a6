"""Bias-corrected headline numbers of a run: mean nDCG@10 and relevance corrected by people's grades
(power-tuned prediction-powered inference, :mod:`judge_runner.measures.ppi`), per system, with corrected
differences and a ranking (:mod:`judge_runner.measures.ppi_compare`). A query counts for a system when assessors
graded every result it returned and its line keeps the judge's own values (``judgeOnly``). Valid while the
graded queries are a random sample of the scored ones (docs/calibration.md, "Bias-corrected headline numbers")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from judge_runner.measures.failed import Failed, failed_by_system
from judge_runner.measures.ir import NDCG10_NAME, canonical_metric_name
from judge_runner.measures.ppi import CONFIDENCE, MIN_LABELLED
from judge_runner.measures.ppi_compare import Arm, Estimator, Method, corrected_difference, corrected_ranking, uniform_estimator
from judge_runner.runs.corrected_blocks import BLOCK_VERSION, BiasCorrected
from judge_runner.runs.designed import LabelDesign, Weighted, alike_zeros, choose_design

METHOD = (
    "prediction-powered inference, power-tuned (PPI++: Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453), "
    "cross-fitted weight, t intervals clipped to the measure's range"
)
CORRECTED = (NDCG10_NAME, "relevance")


class _Unreadable(Exception):
    """A line has assessors' grades but not the judge's own values (written before they were recorded)."""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _value(line: Mapping[str, Any], column: str) -> float | None:
    if column == "relevance":
        return _number((line.get("scores") or {}).get("relevance"))
    metrics = {canonical_metric_name(k): v for k, v in (line.get("metrics") or {}).items()}
    return _number(metrics.get(column))


def labelled(line: Mapping[str, Any]) -> bool | None:
    """True when assessors graded every result of the line and it keeps ``judgeOnly``; None when they graded
    some; False otherwise."""
    results = line.get("results") or []
    human = sum(1 for r in results if r.get("labelOrigin") == "human")
    if results and human == len(results) and line.get("judgeOnly"):
        return True
    return None if human else False


def scored_lines(evaluations: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """On-topic lines with metrics: what a corrected mean is over."""
    return [line for line in evaluations if line.get("queryType") != "off-topic" and line.get("metrics") is not None]


def split_values(lines: Iterable[Mapping[str, Any]]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, int]]:
    """``(judge, human, counts)`` of one system's scored lines: per column of :data:`CORRECTED` the judge's
    value of every query and the people's of the wholly graded ones, and the counts ``labelled``, ``partly``,
    ``scored``. Raises _Unreadable."""
    judge: dict[str, dict[str, float]] = {c: {} for c in CORRECTED}
    human: dict[str, dict[str, float]] = {c: {} for c in CORRECTED}
    counts = {"labelled": 0, "partly": 0, "scored": 0}
    for line in scored_lines(lines):
        if int(line.get("humanLabels") or 0) and not line.get("judgeOnly"):
            raise _Unreadable
        state = labelled(line)
        qid = str(line.get("queryId"))
        counts["scored"] += 1
        counts["labelled"] += state is True
        counts["partly"] += state is None
        own = line.get("judgeOnly") or {}
        for column in CORRECTED:
            value = _value(line, column)
            judge_value = (_number(own.get(column)) if own else value) if value is not None else None
            if value is None or judge_value is None:
                continue
            judge[column][qid] = judge_value
            if state is True:
                human[column][qid] = value
    return judge, human, counts


MIXED = "some evaluation lines name a search system and others none: the file mixes two runs, whose figures are not corrected"


def systems_of(evaluations: Iterable[Mapping[str, Any]]) -> list[str | None]:
    """The lines' systems in order of first appearance (``[None]`` for lines without one)."""
    return list(dict.fromkeys(line.get("system") for line in evaluations)) or [None]


def _means(
    judge: Mapping[str, Mapping[str, float]], human: Mapping[str, Mapping[str, float]], estimate: Estimator = uniform_estimator
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column in CORRECTED:
        found = estimate(judge[column], human[column], (0.0, 1.0), CONFIDENCE)
        out[column] = found.as_dict() if found is not None else None
    return out


def drawn_note(evaluations: Iterable[Mapping[str, Any]], drawn: Mapping[str, set[tuple[str, str]]]) -> str | None:
    """Why no figure is computed when people's grades of these lines come from a set drawn with unequal
    probabilities (``drawn``: ``{set name: {(qid, docid)}}``); None when none does."""
    if not drawn:
        return None
    pairs = {
        (str(line.get("queryId")), str(r.get("source")))
        for line in evaluations
        for r in line.get("results") or []
        if r.get("labelOrigin") == "human"
    }
    used = sorted(name for name, labelled in drawn.items() if pairs & labelled)
    if not used:
        return None
    return (
        f"the people's labels of {', '.join(repr(n) for n in used)} were drawn by `label --budget` with unequal probabilities "
        "(or leaving out queries known without a label), and a uniform-sample correction of them would be biased; "
        f"their estimate, from the probabilities recorded with them, is the last line of `judge-runner label --name {used[0]}`"
    )


def _differences(
    lines: list[Mapping[str, Any]],
    names: Sequence[str | None],
    parts: Mapping[Any, Any],
    estimate: Estimator,
    drawn: bool,
    failed: Mapping[str, Failed],
) -> list[dict[str, Any]]:
    reference = names[0]
    judge, human, _ = parts[reference]
    return [
        diff.as_dict()
        for name in names[1:]
        for column in CORRECTED
        if (
            diff := corrected_difference(
                Arm(str(reference), judge[column], human[column]),
                Arm(str(name), parts[name][0][column], parts[name][1][column]),
                Method(column=column, estimate=estimate),
                failed=(failed[str(reference)], failed[str(name)]),
                known=alike_zeros(lines, reference, name) if drawn else None,
            )
        )
        is not None
    ]


def _ranking(
    lines: list[Mapping[str, Any]],
    names: Sequence[str | None],
    parts: Mapping[Any, Any],
    estimate: Estimator,
    drawn: bool,
    failed: Mapping[str, Failed],
) -> Any:
    known = {(str(a), str(b)): alike_zeros(lines, a, b) for a in names for b in names if a != b} if drawn else None
    ranking = corrected_ranking(
        {str(n): parts[n][0][NDCG10_NAME] for n in names},
        {str(n): parts[n][1][NDCG10_NAME] for n in names},
        [str(n) for n in names],
        method=Method(estimate=estimate),
        failed=failed,
        known=known,
    )
    return ranking.as_dict() if ranking is not None else None


def bias_corrected(
    evaluations: Iterable[Mapping[str, Any]],
    systems: Sequence[str] | None = None,
    skipped: str | None = None,
    errors: Iterable[Mapping[str, Any]] = (),
    designs: Mapping[str, LabelDesign] | None = None,
) -> dict[str, Any] | None:
    """The summary's ``biasCorrected`` block by alias from a run's ``evaluation`` lines (dicts by alias); None
    when no query of any system is wholly graded or a line lacks ``judgeOnly``. ``systems``: reference first
    (default: order of first appearance). ``errors``: the run's ``error`` lines, whose failed queries each
    difference counts. ``designs``: the sets ``label --budget`` drew, whose grades are weighted by their
    recorded probabilities."""
    lines = list(evaluations)
    design, why = choose_design(lines, designs or {})
    skipped = skipped if designs is None else why
    estimate: Estimator = Weighted(design) if design is not None else uniform_estimator
    names: list[str | None] = list(systems) if systems else systems_of(lines)
    if None in names and len(names) > 1:  # a file mixing two runs (an older resume wrote such files)
        return BiasCorrected(skipped=MIXED).model_dump(by_alias=True, mode="json")
    try:
        parts = {
            name: split_values([line for line in lines if line.get("system") == name] if name is not None else lines) for name in names
        }
    except _Unreadable:
        return None
    if not any(counts["labelled"] for _, _, counts in parts.values()):
        return None
    reference = names[0]
    judge, human, counts = parts[reference]
    block: dict[str, Any] = {
        "version": BLOCK_VERSION,
        "method": METHOD,
        "minimumLabelled": MIN_LABELLED,
        "system": reference,
        "labelledQueries": counts["labelled"],
        "partlyLabelledQueries": counts["partly"],
        "scoredQueries": counts["scored"],
    }
    if skipped:
        return BiasCorrected.model_validate({**block, "skipped": skipped}).model_dump(by_alias=True, mode="json")
    block.update(_means(judge, human, estimate))
    failed = failed_by_system(lines, errors, names) if len(names) > 1 else {}
    if len(names) > 1:
        block["systems"] = [
            {
                "name": name,
                "labelledQueries": part[2]["labelled"],
                "partlyLabelledQueries": part[2]["partly"],
                "scoredQueries": part[2]["scored"],
                **_means(part[0], part[1], estimate),
            }
            for name, part in parts.items()
        ]
        block["differences"] = _differences(lines, names, parts, estimate, design is not None, failed)
    if len(names) > 2:
        block["ranking"] = _ranking(lines, names, parts, estimate, design is not None, failed)
    if isinstance(estimate, Weighted):
        block["design"] = estimate.block()
    return BiasCorrected.model_validate(block).model_dump(by_alias=True, mode="json")
