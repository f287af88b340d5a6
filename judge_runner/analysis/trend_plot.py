"""Trend charts: each measure's mean over time across one judge's runs (matplotlib, imported when drawn)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from judge_runner.analysis.changes import GATED
from judge_runner.analysis.trend import COLUMNS, Run, latest_group, read_runs
from judge_runner.judging.cache import JudgmentCache


def plot_runs(group: list[Run], out: Path, columns: tuple[str, ...] = COLUMNS, title: str | None = None) -> Path:
    """A PNG line chart of ``columns`` (means over queries) across ``group``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    x = list(range(len(group)))
    for column in columns:
        ys = [r.mean(column) for r in group]
        ax.plot(x, [np.nan if y is None else y for y in ys], marker="o", label=column, linewidth=2.4 if column in GATED else 1.2)
    days = [r.timestamp[:10] for r in group]
    labels = days if len(set(days)) == len(days) else [r.timestamp[:16].replace("T", " ") for r in group]
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("mean over queries")
    ax.set_title(title or f"Search quality over time — judge {group[-1].judge_label}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8, ncol=4)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_trend(folder: Path, out: Path, cache: JudgmentCache | None = None) -> Path:
    """A PNG of each dimension, overall and nDCG@10 over time for the newest judge group. Raises ValueError
    when the folder has no complete run."""
    runs, _ = read_runs(folder, cache)
    try:
        group = latest_group(runs)
    except ValueError:
        raise ValueError(f"no complete run in {folder} to plot") from None
    return plot_runs(group, out)
