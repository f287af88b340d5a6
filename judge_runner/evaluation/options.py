"""Phase two's options (:class:`EvaluateOptions`): built once from the settings by the job, read by the
run loop, the lines it writes and the summary.
"""

from __future__ import annotations

from dataclasses import dataclass

from judge_runner.core.models import JudgeMode, SearchMode
from judge_runner.judging.fingerprint import DEFAULT_SEED
from judge_runner.judging.labelling import ProtocolSettings


@dataclass
class EvaluateOptions:
    """Phase-two settings: search mode and depth, judge concurrency, dimension weights, CI gate, and the
    judge protocol: ``judge_mode`` (pointwise|batched), ``trials`` (>= 1), base ``seed``,
    ``human_qrels`` (names of imported human qrels to apply; None: every imported set)."""

    search_mode: SearchMode = "hybrid"
    search_limit: int = 10
    concurrency: int = 5
    weights: dict[str, float] | None = None
    min_overall: float | None = None
    judge_mode: JudgeMode = "pointwise"
    trials: int = 1
    seed: int = DEFAULT_SEED
    human_qrels: tuple[str, ...] | None = None

    @property
    def protocol(self) -> ProtocolSettings:
        """The judge protocol these options ask for."""
        return ProtocolSettings(self.judge_mode, self.trials, self.seed, self.weights, self.search_limit)
