"""Every :class:`~judge_runner.judging.protocol.Judge` implementation, built in one place for the judge contract
(tests/judging/test_judge_contract.py). A new judge class in judge_runner/ must get a case in :data:`JUDGES`:
the contract's completeness test fails until it has one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from judge_runner.embed.hashing import HashEmbedder
from judge_runner.estimate.costs import RecordingJudge
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.llm.batch_provider import batching_provider
from judge_runner.llm.registry import get_spec
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.fault_runs import make_provider


@dataclass
class JudgeUnderTest:
    """An open judge: ``judge`` itself, ``server`` (the loopback fake it calls, None for a judge that sends
    nothing), and :meth:`call`, which makes one of its calls the way a run does."""

    judge: Any
    server: FakeLLMServer | None = None
    unit: Callable[[], Any] | None = None

    def call(self, method: str, *args: Any) -> Any:
        """``judge.<method>(*args)``; inside a counted worker of the batch coordinator for a ``--batch`` judge
        (a run's query worker), so the call's batch is submitted once it waits."""
        if self.unit is None:
            return getattr(self.judge, method)(*args)
        with self.unit():
            return getattr(self.judge, method)(*args)


@dataclass(frozen=True)
class JudgeCase:
    """One judge under the contract. ``cls``: the class it is (every Judge class of judge_runner/ must be the
    ``cls`` of a case); ``offline``: sends nothing and costs nothing; ``heuristic``: what the judge must say of
    itself; ``grades``: its labels follow the document (a dry run's judge answers placeholders);
    ``batch_api``: its calls go through a provider's batch API (``--batch``)."""

    id: str
    cls: type
    offline: bool
    heuristic: bool
    grades: bool
    open: Callable[[], Any]
    batch_api: bool = False


@contextmanager
def _llm(api: str) -> Iterator[JudgeUnderTest]:
    with FakeLLMServer() as server:
        yield JudgeUnderTest(LLMJudge(make_provider(server, api)), server)


@contextmanager
def _llm_batch_api(api: str) -> Iterator[JudgeUnderTest]:
    with FakeLLMServer() as server:
        provider = batching_provider(make_provider(server, api), get_spec(api).load_batches(), max_poll_s=0.05)
        coordinator = provider.coordinator

        @contextmanager
        def unit() -> Iterator[None]:
            coordinator.expect(1)
            with coordinator.unit():
                yield

        yield JudgeUnderTest(LLMJudge(provider), server, unit)


@contextmanager
def _heuristic() -> Iterator[JudgeUnderTest]:
    yield JudgeUnderTest(HeuristicJudge(HashEmbedder()))


@contextmanager
def _dry_run() -> Iterator[JudgeUnderTest]:
    yield JudgeUnderTest(RecordingJudge("anthropic", "claude-sonnet-4-6", layouts=[("openai", "gpt-4.1")]))


JUDGES: tuple[JudgeCase, ...] = (
    # LLMJudge, each call through the real SDK to the loopback fake, whose honest judge grades what it is shown
    JudgeCase("llm-anthropic", LLMJudge, offline=False, heuristic=False, grades=True, open=lambda: _llm("anthropic")),
    JudgeCase("llm-openai", LLMJudge, offline=False, heuristic=False, grades=True, open=lambda: _llm("openai")),
    # the same judge over the Anthropic Message Batches API (--batch)
    JudgeCase(
        "llm-anthropic-batch-api",
        LLMJudge,
        offline=False,
        heuristic=False,
        grades=True,
        open=lambda: _llm_batch_api("anthropic"),
        batch_api=True,
    ),
    # --provider offline, on the hashing embedder (the contract measures no search quality)
    JudgeCase("heuristic", HeuristicJudge, offline=True, heuristic=True, grades=True, open=_heuristic),
    # --dry-run's judge: records the calls an LLM judge would make, answers placeholders, sends nothing
    JudgeCase("dry-run", RecordingJudge, offline=True, heuristic=False, grades=False, open=_dry_run),
)
