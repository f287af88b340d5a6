"""The two roles an LLM (or the offline heuristic) plays, and the one place that builds them for a run:
the query writer (phase one) and the judge (phase two). It lives above ``llm/`` because it assembles
pieces the LLM layer must not import (the heuristic reads the corpus and embeds).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from judge_runner.config import ConfigError, Settings
from judge_runner.embed.base import TextEmbedder
from judge_runner.embed.registry import choose
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.judging.protocol import Judge
from judge_runner.llm.base import ChatProvider
from judge_runner.llm.batch_api import BatchUnavailable, BatchUnreachable
from judge_runner.llm.batch_provider import batching_provider
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import AuthError, SpendLimitError
from judge_runner.llm.pricing import Price, sizing_problem
from judge_runner.llm.registry import ProviderSpec, detect, get_spec, missing_key
from judge_runner.llm.retry import RetryPolicy
from judge_runner.querygen.agent import LLMQueryWriter
from judge_runner.querygen.heuristic import HeuristicQueryWriter
from judge_runner.querygen.protocol import QueryWriter


@dataclass(frozen=True)
class Roles:
    """What a run is given: the query writer (None when it writes none), the judge, the ``budget`` both spend
    (USD), the line describing the choice, the judge ``concurrency`` (1 for a local server unless set), the
    judge's standard ``judge_price`` (USD per million tokens; None when heuristic or unknown), and the
    command's one ``embedder``."""

    writer: QueryWriter | None
    judge: Judge
    budget: Budget
    description: str
    concurrency: int
    embedder: TextEmbedder
    judge_price: Price | None = None


def build_roles(
    settings: Settings,
    need_generator: bool,
    say: Callable[[str], None] = lambda message: None,
    environ: Mapping[str, str] | None = None,
    embedder: TextEmbedder | None = None,
) -> Roles:
    """The roles for a run of ``settings.provider`` (``auto``: :func:`judge_runner.llm.registry.detect`).

    ``say`` gets the line naming provider and models and a warning per unknown price. ``embedder``: the
    open index's, else None (the setting's, else the default). With ``settings.batch`` the judge is wrapped
    for its batch API. Raises ConfigError (exit 2) for a missing key, for ``--max-budget-usd`` with an
    unknown price, and for ``--batch`` with the heuristic.
    """
    environ = os.environ if environ is None else environ
    embedder = embedder if embedder is not None else choose(settings.embedder)
    budget = Budget(max_usd=settings.max_budget_usd, per_call_cap_usd=settings.per_call_cap_usd, max_tokens=settings.max_budget_tokens)
    if settings.provider == "auto":
        spec, reason = detect(environ)
    else:
        spec, reason = get_spec(settings.provider), settings.source_of("provider") or "the provider setting"
    check_batch_provider(spec, reason, settings)
    if spec.heuristic:
        description = f"provider: {spec.name} ({reason}) - a deterministic HEURISTIC judge, not an LLM; set an API key for real judgments"
        say(description)
        writer = HeuristicQueryWriter() if need_generator else None
        return Roles(writer, HeuristicJudge(embedder), budget, description, settings.concurrency, embedder)

    problem = missing_key(spec, environ)
    if problem:
        raise ConfigError(problem)
    cls = spec.load()
    retry = RetryPolicy(max_retries=settings.max_retries, cap_s=settings.retry_cap, deadline_s=settings.deadline)
    model = settings.model or spec.default_model
    judge_model = settings.judge_model or model
    # the key and server come from ``environ`` (the one the choice was made with), first key variable set wins
    connection = {
        "api_key": next((environ[k] for k in spec.key_env if environ.get(k)), None),
        "base_url": (environ.get(spec.base_url_env) or None) if spec.base_url_env else None,
    }
    generator = cls(model, retry, budget, settings.timeout, **connection) if need_generator else None
    judge = cls(judge_model, retry, budget, settings.timeout, **connection)
    judge.reasoning_effort = settings.reasoning_effort  # a reasoning model grades with little effort
    if generator is not None:
        generator.reasoning_effort = "medium"  # and explores at the API's own default, said explicitly
    description = f"provider: {spec.name} ({reason}); generator model {model if need_generator else '-'}, judge model {judge_model}"
    say(description)
    concurrency, notes = judge.prepare_run(generator, settings.concurrency, "concurrency" in settings.model_fields_set)
    for note in notes:
        say(note)
    for label, provider in (("generator", generator), ("judge", judge)):
        if provider is None:
            continue
        if provider.price is None:
            provider.price = settings.user_price
        sizing = sizing_problem(provider.model)
        if sizing is not None:
            say(f"warning: the {label} model {provider.model}: {sizing}")
        if provider.price is None:
            if settings.max_budget_usd is not None:
                raise ConfigError(
                    f"no price is known for the {label} model {provider.model}, so --max-budget-usd cannot be "
                    f"enforced; give its price with --price-per-mtok IN,OUT or cap tokens with --max-budget-tokens instead"
                )
            budget.cost_known = False  # the run's cost is unknown, never shown as 0
            say(
                f"warning: no price known for the {label} model {provider.model}: cost will be reported as unknown"
                f"{'' if settings.max_budget_tokens else ' (--max-budget-tokens caps the run by tokens)'}"
            )
    price = judge.price  # the standard price, before batch mode halves it
    if settings.batch:
        judge = batch_judge(spec, judge, settings.batch_poll, say)
    llm_writer = LLMQueryWriter(generator) if generator is not None else None
    return Roles(llm_writer, LLMJudge(judge), budget, description, concurrency, embedder, price)


def check_batch_provider(spec: ProviderSpec, reason: str, settings: Settings) -> None:
    """Raises ConfigError (exit 2) for ``--batch`` with the heuristic provider (chosen because of ``reason``)."""
    if spec.heuristic and settings.batch:
        raise ConfigError(
            f"--batch sends the judge's calls through an LLM provider's batch API, but the provider is {spec.name} ({reason}): "
            f"the heuristic judge makes no API calls; set --provider anthropic or openai, or drop --batch"
        )


def batch_judge(spec: ProviderSpec, judge: ChatProvider, max_poll_s: float, say: Callable[[str], None]) -> ChatProvider:
    """``judge`` wrapped for ``--batch`` once one free request has shown the server has a batch API. Raises
    ConfigError (exit 2, nothing spent) for a provider or server without one (404/405), an unreachable
    server, or a refused key."""
    if spec.batch_target is None:
        raise ConfigError(f"--batch: the {spec.name} provider has no batch API")
    try:
        wrapped = batching_provider(judge, spec.load_batches(), max_poll_s)
    except BatchUnavailable as exc:
        raise ConfigError(f"--batch: {exc}; run without --batch") from None
    except BatchUnreachable as exc:
        raise ConfigError(f"--batch: {exc}; check the base URL and that the server is running") from None
    except AuthError as exc:  # what a synchronous run's first call says (exit 2)
        raise ConfigError(f"{exc}; check the API key") from None
    except SpendLimitError as exc:
        raise ConfigError(str(exc)) from None
    say(f"batch mode: the judge's calls go through the {spec.name} batch API at batch prices (results may take up to 24 h)")
    return wrapped
