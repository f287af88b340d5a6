"""Phase two's options, built once from the settings by the job."""

from __future__ import annotations

from dataclasses import dataclass

from judge_runner.core.models import JudgeMode, SearchMode
from judge_runner.judging.fingerprint import DEFAULT_SEED
from judge_runner.judging.labelling import ProtocolSettings


@dataclass
class EvaluateOptions:
    """Phase two's settings: search mode and depth, concurrency, weights, CI gate, and the judge protocol
    (``trials`` >= 1; ``human_qrels``: names of the imported sets of grades, None: all)."""

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
        return ProtocolSettings(self.judge_mode, self.trials, self.seed, self.weights, self.search_limit)
