"""The figures corrected by people's grades, for people: one-line texts (``trend``, ``evaluate``) and the
report's "Bias-corrected estimate" section. Every text says why a figure is missing and, beside each
corrected figure, what people's grades say alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge_runner.core.mdtext import md_text
from judge_runner.measures.ppi import MIN_LABELLED

LABELS = {"nDCG@10": "nDCG@10", "relevance": "relevance"}


def _interval(ci: list[float], signed: bool = False) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if signed else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def too_few(labelled: int, minimum: int = MIN_LABELLED) -> str:
    return f"not shown: {labelled} labelled {'query' if labelled == 1 else 'queries'}, a corrected figure needs at least {minimum}"


NOT_NARROWED = "the judge did not narrow it, so this is the people's labels alone"


def weight_text(f: Mapping[str, Any]) -> str:
    """``judge weight 0.64``, or that the judge added nothing."""
    if not f.get("judgeInformative", True):
        return NOT_NARROWED
    return f"judge weight {f.get('weight', 1.0):.2f}"


def _alone(f: Mapping[str, Any], signed: bool = False) -> str:
    """``; people's labels alone 0.598 [0.520, 0.680]``, or nothing when the figure is the people's alone."""
    if not f.get("judgeInformative", True):
        return ""
    human = f["humanOnly"]
    mean = f"{human['mean']:+.3f}" if signed else f"{human['mean']:.3f}"
    return f"; people's labels alone {mean} {_interval(human['ci95'], signed)}"


def corrected_text(block: Mapping[str, Any] | None, column: str = "nDCG@10") -> str:
    """A run's ``biasCorrected`` mean in one line (``bias-corrected nDCG@10 0.612 [0.551, 0.673] (...)``), or
    why it is not shown; empty without a block."""
    if not block:
        return ""
    if block.get("skipped"):
        return f"bias-corrected {column} not shown: {block['skipped']}"
    labelled, scored = block.get("labelledQueries", 0), block.get("scoredQueries", 0)
    f = block.get(column)
    if not f:
        return f"bias-corrected {column} {too_few(labelled, block.get('minimumLabelled', MIN_LABELLED))} (of {scored} scored)"
    return (
        f"bias-corrected {column} {f['estimate']:.3f} {_interval(f['ci95'])} "
        f"(judge {f['judgeMean']:.3f}, correction {f['correction']:+.3f}, {weight_text(f)}{_alone(f)}; "
        f"{labelled} of {scored} queries human-labelled{design_text(block)})"
    )


def design_text(block: Mapping[str, Any]) -> str:
    """``; a census: ...`` or ``; labels drawn by label --budget ...`` for a block a budget drew; else empty."""
    design = block.get("design")
    if not design:
        return ""
    if design.get("census"):
        return f"; a census of {design['set']!r}: every query labelled, the people's exact figure on this query set"
    return f"; drawn by `label --budget` ({design['set']!r}), each label weighted by the probability it was drawn with"


def difference_text(diff: Mapping[str, Any], name: str | None = None) -> str:
    """A corrected difference in one line: ``corrected nDCG@10 vector - fts +0.041 [+0.012, +0.070]: ...``."""
    what = name or f"{diff['system']} - {diff['against']}"
    return (
        f"corrected {diff['column']} {what} {diff['estimate']:+.3f} {_interval(diff['ci95'], True)}: {diff['verdict']} "
        f"(judge alone {diff['judgeDelta']:+.3f}, {weight_text(diff)}{_alone(diff, True)}; "
        f"{diff['labelled']} of {diff['queries']} queries labelled)"
    )


def ranking_text(ranking: Mapping[str, Any] | None) -> str:
    """``corrected ranking by nDCG@10: hybrid 0.71 (rank 1-2), ...``; empty without one."""
    if not ranking:
        return ""
    parts = []
    for s in ranking["systems"]:
        low, high = s["rankSet"]
        rank = f"rank {low}" if low == high else f"rank {low}-{high}"
        value = f" {s['corrected']['estimate']:.3f}" if s.get("corrected") else ""
        parts.append(f"{s['name']}{value} ({rank})")
    return (
        f"corrected ranking by {ranking['column']} ({ranking['confidence']:.0%} together): "
        + ", ".join(parts)
        + f"; could be first: {', '.join(ranking['couldBeFirst'])}"
    )


def block_lines(block: Mapping[str, Any] | None, others: bool = True) -> list[str]:
    """Every one-line text of a block, each of several systems' named; ``others`` False leaves out the other
    systems and the names (trend's own rows, which name their system)."""
    if not block:
        return []
    named = others and len(block.get("systems") or []) > 1 and block.get("system")
    first = f"{block['system']}: " if named else ""
    if block.get("skipped"):
        return [first + corrected_text(block)]
    lines = [first + corrected_text(block)]
    for system in (block.get("systems") or []) if others else []:
        if system["name"] != block.get("system"):
            lines.append(f"{system['name']}: " + corrected_text(system))
    lines += [difference_text(d) for d in block.get("differences") or [] if d["column"] == "nDCG@10"]
    text = ranking_text(block.get("ranking"))
    return [*lines, *([text] if text else [])]


def _mean_row(name: str, f: Mapping[str, Any] | None, labelled: int, minimum: int) -> str:
    if not f:
        return f"| {name} | – | – | {md_text(too_few(labelled, minimum))} | – | – |"
    return (
        f"| {name} | {f['judgeMean']:.3f} | {f['correction']:+.3f} | {f['estimate']:.3f} {_interval(f['ci95'])} "
        f"| {md_text(weight_text(f))} | {f['humanOnly']['mean']:.3f} {_interval(f['humanOnly']['ci95'])} |"
    )


def corrected_markdown(block: dict | None, change: Mapping[str, Any] | None = None, against: str | None = None) -> list[str]:
    """The report's section for a ``biasCorrected`` block and the corrected ``change`` since run ``against``;
    [] with neither."""
    if not block and not change:
        return []
    md = ["## Bias-corrected estimate", ""]
    if block and block.get("skipped"):
        md += [f"Not shown: {md_text(block['skipped'])}.", ""]
    elif block:
        labelled, scored, partly = block["labelledQueries"], block["scoredQueries"], block.get("partlyLabelledQueries", 0)
        minimum = block.get("minimumLabelled", MIN_LABELLED)
        scope = f" of {md_text(block['system'])}" if block.get("systems") and block.get("system") else ""
        md += [
            f"{labelled} of the {scored} scored queries{scope} have every result labelled by a person"
            + (f" ({partly} more only partly, which do not count)" if partly else "")
            + ". The judge's mean over all queries is corrected with them: "
            + md_text(block.get("method") or "prediction-powered inference")
            + f". A figure needs at least {minimum} labelled queries. "
            + (
                md_text(block["design"]["text"]) + ". " + " ".join(md_text(n) + "." for n in block["design"].get("notes") or [])
                if block.get("design")
                else "The correction is valid while the labelled queries are a random sample of the query set."
            ),
            "",
            "| measure | judge alone | correction | bias-corrected (95% CI) | judge | labelled queries alone (95% CI) |",
            "|---|---|---|---|---|---|",
        ]
        md += [_mean_row(name, block.get(key), labelled, minimum) for key, name in LABELS.items()]
        md.append("")
        md += _systems_markdown(block)
    if change:
        md += [f"Change since {md_text(against or 'the previous run')}, corrected with the people's labels (paired per query):", ""]
        md += [f"- {md_text(difference_text(d, 'new - old'))}" for d in change.values()]
        md.append("")
    return md


def _systems_markdown(block: Mapping[str, Any]) -> list[str]:
    systems, differences = block.get("systems") or [], block.get("differences") or []
    if not systems:
        return []
    minimum = block.get("minimumLabelled", MIN_LABELLED)
    md = [
        "Each system's nDCG@10, corrected over its own lines:",
        "",
        "| system | labelled | bias-corrected nDCG@10 (95% CI) | judge | labelled alone |",
        "|---|---|---|---|---|",
    ]
    for s in systems:
        f = s.get("nDCG@10")
        cell = f"{f['estimate']:.3f} {_interval(f['ci95'])}" if f else md_text(too_few(s["labelledQueries"], minimum))
        judge = md_text(weight_text(f)) if f else "–"
        alone = f"{f['humanOnly']['mean']:.3f} {_interval(f['humanOnly']['ci95'])}" if f else "–"
        md.append(f"| {md_text(s['name'])} | {s['labelledQueries']} of {s['scoredQueries']} | {cell} | {judge} | {alone} |")
    md.append("")
    if differences:
        md += ["| difference | measure | corrected (95% CI) | verdict | judge alone | labelled alone |", "|---|---|---|---|---|---|"]
        for d in differences:
            md.append(
                f"| {md_text(d['system'])} − {md_text(d['against'])} | {d['column']} | {d['estimate']:+.3f} {_interval(d['ci95'], True)} "
                f"| {md_text(d['verdict'])} | {d['judgeDelta']:+.3f} | {d['humanOnly']['mean']:+.3f} {_interval(d['humanOnly']['ci95'], True)} |"
            )
        md.append("")
    elif len(systems) > 1:
        md += [f"No corrected difference: fewer than {minimum} queries are labelled for both systems.", ""]
    text = ranking_text(block.get("ranking"))
    if text:
        md += [
            md_text(text[0].upper() + text[1:]) + ". A rank set holds every rank the system could have with the people's labels so far.",
            "",
        ]
    return md


def corrected_comparison_markdown(block: Mapping[str, Any] | None) -> list[str]:
    """The compare report's corrected differences and ranking; [] without a compare run's block."""
    if not block or not block.get("systems"):
        return []
    md = ["", "Corrected with the people's labels (prediction-powered, paired per query; the judge alone beside):", ""]
    differences = block.get("differences") or []
    md += [f"- {md_text(difference_text(d))}" for d in differences]
    if not differences:
        md.append(
            f"- no corrected difference: fewer than {block.get('minimumLabelled', MIN_LABELLED)} queries are labelled for both systems"
        )
    text = ranking_text(block.get("ranking"))
    return md + ([f"- {md_text(text)}"] if text else [])
