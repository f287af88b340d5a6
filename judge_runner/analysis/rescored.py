"""A compare run's ``comparison`` as it stands against the qrels known now: each system's figures and the
paired differences computed again from the run's re-scored records, by the rule the summary used
(:func:`judge_runner.evaluation.compare.comparison_block`). The summary's own block holds the figures of the
qrels known when the run ended; ``trend`` and ``report`` show this one beside their re-scored rows."""

from __future__ import annotations

from judge_runner.evaluation.compare import comparison_block
from judge_runner.runs.read import RunRecords
from judge_runner.runs.summary_blocks import ComparisonBlock, SystemDifference

FIGURES = ("evaluated", "failed", "averageScores", "averageMetrics")
"""What changes with the qrels; abstention, issues and focus are kept from the summary (the records carry no
judge's texts)."""


def comparison_now(file: RunRecords) -> ComparisonBlock | None:
    """The summary's ``comparison`` with every figure from ``file``'s records as re-scored (call after
    :func:`judge_runner.analysis.trend.pool_metrics`); None for a run of one system or without a summary."""
    stored = file.summary.comparison if file.summary is not None else None
    if stored is None or not stored.systems:
        return None
    config = (file.run_start.config if file.run_start is not None else None) or {}
    weights, depth = config.get("weights"), config.get("searchLimit")
    block = comparison_block(
        [dict(record) for record in file.evaluations],
        [e.line() for e in file.errors],
        [s.name for s in stored.systems],
        stored.minEffect,
        weights if isinstance(weights, dict) else None,
        depth if isinstance(depth, int) and not isinstance(depth, bool) else None,
    )
    systems = [old.model_copy(update={k: new[k] for k in FIGURES}) for old, new in zip(stored.systems, block["systems"], strict=True)]
    differences = [SystemDifference.model_validate(d) for d in block["differences"]]
    return stored.model_copy(update={"systems": systems, "differences": differences})
