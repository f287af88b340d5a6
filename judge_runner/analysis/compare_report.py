"""A compare run in the weekly report: each system's means, the paired differences to the reference with
95% intervals and verdicts, and a grouped bar chart."""

from __future__ import annotations

from pathlib import Path

from judge_runner.analysis.corrected_report import corrected_comparison_markdown
from judge_runner.core.mdtext import md_text
from judge_runner.runs.summary_blocks import ComparisonBlock, SystemDifference

COLUMNS = ("relevance", "ranking", "coverage", "snippetQuality", "overall", "nDCG@10", "R@10")
MARKS = {"regression": "▼ regression", "improvement": "▲ improvement", "within noise": "within noise", "too few queries": "too few queries"}


def _verdict(diff: SystemDifference) -> str:
    """The verdict cell: the mark, or the failed queries' words when they count."""
    if diff.failed is None:
        return MARKS.get(diff.verdict, diff.verdict)
    if not diff.failed.holds:
        return md_text(diff.failed.text)
    mark = MARKS.get(diff.verdict, diff.verdict)
    return f"{mark} ({md_text(diff.failed.text)})" if diff.failed.secondFigure is not None else mark


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def comparison_markdown(block: ComparisonBlock, chart: Path | None, corrected: dict | None = None) -> list[str]:
    """The report's "Systems compared" section (no raw ``|`` in a cell), with the differences and ranking
    corrected by people's grades when ``corrected`` has them."""

    def cell(text: str) -> str:
        return md_text(text)  # literal text, table pipes escaped (system names come from flags and config files)

    md = [
        "## Systems compared",
        "",
        f"One run, every system on the same queries; differences are paired (system − {cell(block.reference)}), with "
        f"95% bootstrap intervals; a change needs an interval clear of zero and at least {block.minEffect:.2f} in size. "
        "A query a system failed counts at 0; when at the other system's value it would change the verdict, the verdict is "
        "cannot tell.",
        "",
        "| system | evaluated | failed | " + " | ".join(COLUMNS) + " |",
        "|---" * (3 + len(COLUMNS)) + "|",
    ]
    for system in block.systems:
        values = {**(system.averageScores or {}), **(system.averageMetrics or {})}
        md.append(
            f"| {cell(system.name)} | {system.evaluated} | {system.failed} | " + " | ".join(_fmt(values.get(c)) for c in COLUMNS) + " |"
        )
    md += ["", "| system | measure | mean | reference | difference | 95% interval | verdict |", "|---|---|---|---|---|---|---|"]
    for diff in block.differences:
        low, high = diff.ci95
        interval = "–" if low is None or high is None else f"[{low:+.3f}, {high:+.3f}]"
        delta = "–" if diff.delta is None else f"{diff.delta:+.3f}"
        md.append(
            f"| {cell(diff.system)} | {diff.column} | {_fmt(diff.mean)} | {_fmt(diff.referenceMean)} | {delta} | {interval} | "
            f"{_verdict(diff)} |"
        )
    md += corrected_comparison_markdown(corrected)
    focus = [f"- {cell(system.name)}: {cell(system.recommendedFocus)}" for system in block.systems if system.recommendedFocus]
    if focus:
        md += ["", "Recommended focus of each system, over its own queries:", "", *focus]
    if chart is not None:
        md += ["", f"![systems compared]({chart.name})"]
    return md + [""]


def plot_comparison(block: ComparisonBlock, out: Path) -> Path:
    """A PNG grouped bar chart: per column, each system's mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    x = np.arange(len(COLUMNS))
    width = 0.8 / max(1, len(block.systems))
    for i, system in enumerate(block.systems):
        values = {**(system.averageScores or {}), **(system.averageMetrics or {})}
        ys = [float("nan") if (v := values.get(c)) is None else float(v) for c in COLUMNS]
        ax.bar(x + (i - (len(block.systems) - 1) / 2) * width, ys, width, label=system.name)
    ax.set_xticks(x, COLUMNS, rotation=20, ha="right")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("mean over queries")
    ax.set_title(f"Systems compared (reference {block.reference})")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
