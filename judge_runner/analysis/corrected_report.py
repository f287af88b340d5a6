"""The report's "Bias-corrected estimate" section: the latest run's mean nDCG@10 and relevance corrected by its
human-labelled queries (prediction-powered inference; :mod:`judge_runner.runs.corrected`), with how many
queries were labelled and what the correction was."""

from __future__ import annotations

from judge_runner.core.mdtext import md_text

LABELS = {"nDCG@10": "nDCG@10", "relevance": "relevance"}


def _interval(ci: list[float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def corrected_markdown(block: dict | None) -> list[str]:
    """Markdown lines of the section for a run's ``biasCorrected`` block; [] without one."""
    if not block:
        return []
    labelled, scored, partly = block["labelledQueries"], block["scoredQueries"], block.get("partlyLabelledQueries", 0)
    md = [
        "## Bias-corrected estimate",
        "",
        f"{labelled} of the {scored} scored queries have every result labelled by a person"
        + (f" ({partly} more only partly, which do not count)" if partly else "")
        + ". The judge's mean over all queries is corrected by the mean of (human − judge) on them: "
        + md_text(block.get("method") or "prediction-powered inference")
        + ". The correction is valid while the labelled queries are a random sample of the query set.",
        "",
        "| measure | judge alone | correction | bias-corrected (95% CI) | labelled queries alone (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for key, name in LABELS.items():
        f = block.get(key)
        if not f:
            md.append(f"| {name} | – | – | too few labelled queries | – |")
            continue
        md.append(
            f"| {name} | {f['judgeMean']:.3f} | {f['correction']:+.3f} | {f['estimate']:.3f} {_interval(f['ci95'])} "
            f"| {f['humanOnly']['mean']:.3f} {_interval(f['humanOnly']['ci95'])} |"
        )
    return [*md, ""]
