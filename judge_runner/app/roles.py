"""The two roles an LLM (or the offline heuristic) plays, and the one place that builds them for a run.

- :class:`QueryWriter` (phase one) writes a query set from the knowledge base:
  :class:`judge_runner.querygen.agent.LLMQueryWriter` (the exploring agent over a ChatProvider) or
  :class:`judge_runner.querygen.heuristic.HeuristicQueryWriter`.
- :class:`Judge` (phase two) answers the label-first protocol's single calls (issue 14; caching, trials
  and scores are :mod:`judge_runner.judging.labelling`'s):
  :class:`judge_runner.judging.llm_judge.LLMJudge` (over a ChatProvider) or
  :class:`judge_runner.judging.heuristic.HeuristicJudge` (embedder injected).

:func:`build_roles` turns the settings into a run's :class:`Roles` using the provider registry
(:mod:`judge_runner.llm.registry`): ``auto`` detection, key checks, retry policy, budget and prices. It
lives here, above ``llm/``, because it assembles pieces the LLM layer must not import (the heuristic
reads the corpus and uses embeddings).
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
    """What a run is given: the query writer (None when the run writes no queries), the judge, the
    budget both spend (:class:`~judge_runner.llm.budget.Budget`, holding ``--max-budget-usd`` in USD), the
    line describing the choice (already said on stderr), the judge ``concurrency`` to use (the setting,
    or 1 for a local server the user did not set it for: ``ChatProvider.prepare_run``), and the judge
    model's standard ``judge_price`` (USD per million tokens; None for the heuristic or an unknown price;
    under ``--batch`` the provider itself charges the batch price), and the command's one ``embedder``
    (the heuristic judge's, the query review's near-duplicates': the open index's when there is one)."""

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

    ``say`` gets the line naming the provider and models (loudly HEURISTIC for ``offline``) and one
    warning per model whose price is unknown (the run's cost is then reported as unknown). ``environ``
    defaults to ``os.environ``; ``embedder``: the command's one embedder, the open index's
    (``index.embedder``) when the command has an index, else None: the ``embedder`` setting's, else the
    default (:func:`judge_runner.embed.registry.choose`); the heuristic judge embeds with it. Raises ConfigError (exit code 2) when the provider's key
    is missing, or when ``--max-budget-usd`` is set but a model's price is unknown; with ``settings.batch``
    (``--batch``) the judge's provider is wrapped for its batch API (:func:`batch_judge`), and the heuristic
    provider is a ConfigError (it makes no API calls to batch).
    """
    environ = os.environ if environ is None else environ
    embedder = embedder if embedder is not None else choose(settings.embedder)
    budget = Budget(max_usd=settings.max_budget_usd, per_call_cap_usd=settings.per_call_cap_usd, max_tokens=settings.max_budget_tokens)
    if settings.provider == "auto":
        spec, reason = detect(environ)
    else:
        spec, reason = get_spec(settings.provider), "--provider"
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
    """Raises ConfigError (exit 2) for ``--batch`` (``settings.batch``) with the heuristic provider ``spec``
    (chosen because of ``reason``): it makes no API calls to batch. The real run and ``--dry-run`` both ask."""
    if spec.heuristic and settings.batch:
        raise ConfigError(
            f"--batch sends the judge's calls through an LLM provider's batch API, but the provider is {spec.name} ({reason}): "
            f"the heuristic judge makes no API calls; set --provider anthropic or openai, or drop --batch"
        )


def batch_judge(spec: ProviderSpec, judge: ChatProvider, max_poll_s: float, say: Callable[[str], None]) -> ChatProvider:
    """``judge`` (a ChatProvider) wrapped for ``--batch`` (:func:`judge_runner.llm.batch_provider.batching_provider`)
    once one free request has shown its server has the batch API. Raises ConfigError (exit 2, nothing
    spent) for a provider without one, a server answering 404/405 (a local OpenAI-compatible server),
    a server that cannot be reached ("cannot reach"), or a refused key (the message a synchronous run's
    refused key gives)."""
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
