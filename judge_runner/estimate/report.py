"""The ``--dry-run`` report: its JSON shape (what ``--json`` prints), its text lines, and the assumptions
behind its figures."""

from __future__ import annotations

import json
from typing import Any

from judge_runner.config import Settings
from judge_runner.core.printer import Printer
from judge_runner.estimate.costs import CHARS_PER_TOKEN, EXPECTED_AGENT_TURNS, MIN_CACHEABLE_TOKENS, MODES, caching_note
from judge_runner.llm.pricing import REASONING_FAMILIES, reasoning_tokens

NOTHING_WRITTEN = "dry run: nothing sent to any provider; no run file, query set or judgment cache written"


def build_report(command: str, settings: Settings, judging: dict[str, Any], phase_one: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dry run's report (what ``--json`` prints): the settings that shape the calls, phase one when the
    run writes queries, phase two, the assumptions, and what was written (nothing)."""
    assumptions = [
        f"tokens: JSON length of the parts of each request the model reads (system, messages, tool schema) / {CHARS_PER_TOKEN}",
        "expected output: a typical reply (a reason of about 120 characters per label); worst case: every call writes its max_tokens "
        "(1024 per pointwise label, 4096 per batched or list call); re-asks (only on invalid replies, at most 2 per call) not included",
        f"batch: every token at the batch price (pricing.json batchDiscount); cached: the tool schema and system prompt (when at least the "
        f"model's minimum, pricing.json cacheMinTokens: {MIN_CACHEABLE_TOKENS} to 4096 tokens) written once per request kind, then read from the prompt cache",
        reasoning_assumption(settings.reasoning_effort),
    ]
    if judging.get("precision") == "rough":
        assumptions.append(
            f"rough: phase two of a query set not yet written: {judging['queries']} queries x {settings.search_limit} results, "
            "each a chunk of the chunker's maximum size; all on-topic (one list call each); nothing cached"
        )
    if phase_one is not None and phase_one.get("answerability") is not None:
        assumptions.append(
            f"rough: phase one's answerability check: {phase_one['answerability']['queries']} on-topic queries (the off-topic ones "
            "are not checked), each labelled against one passage of the chunker's maximum size (more expected sources, more "
            "labels); in pointwise mode phase two reuses these labels from the judgment cache when it shows the same passage"
        )
    if phase_one is not None:
        assumptions.append(
            f"rough: phase one: {EXPECTED_AGENT_TURNS} agent requests, each resending the conversation with one tool result of "
            f"the corpus's mean file size ({phase_one['meanFileChars']} characters); worst case 30 requests, each result a full "
            "12000-character read and each reply 8192 tokens (no request above a 200k-token context); the agent's turns cannot "
            "be batched or cached, so every mode costs the sync price"
        )
    return {
        "dryRun": True,
        "command": command,
        "written": "nothing",
        "judgeMode": settings.judge_mode,
        "trials": settings.trials,
        "searchMode": settings.search_mode,
        "searchLimit": settings.search_limit,
        "phaseOne": phase_one,
        "phaseTwo": judging,
        "assumptions": assumptions,
        "runMode": "batch+cached" if settings.batch else "cached",
        "maxBudgetUsd": settings.max_budget_usd,
    }


def reasoning_assumption(effort: str) -> str:
    """The assumption behind a reasoning model's figures at ``effort``."""
    expected, allowance = reasoning_tokens(effort)
    return (
        f"reasoning models ({', '.join(REASONING_FAMILIES)}): each call sent reasoning effort {effort} is assumed to reason "
        f"{expected:,} tokens, billed as output (a rough figure, not measured: calibrate's spend gives the real one); its token "
        f"limit, and so the worst case, is {allowance:,} tokens higher"
    )


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}"


def report_lines(report: dict[str, Any]) -> list[str]:
    lines = [NOTHING_WRITTEN]
    head = f"{'provider/model':<30} {'calls':>6} {'input tok':>11} {'output tok':>10}"
    head += "".join(f" {m + ' $ (worst)':>26}" for m in MODES)

    def row(r: dict[str, Any]) -> str:
        name = ("* " if r["chosen"] else "  ") + f"{r['provider']}/{r['model']}"
        text = f"{name:<30} {r['calls']:>6,} {r['inputTokens']:>11,} {r['outputTokens']:>10,}"
        for m in MODES:
            c = r["costUsd"][m]
            text += f" {_usd(c['expected']) + ' (' + _usd(c['worst']) + ')':>26}"
        return text

    one = report.get("phaseOne")
    if one is not None:
        lines.append(f"phase one (rough: the query writer exploring {one['corpusFiles']} files):")
        lines += [head] + [row(r) for r in one["writers"]]
        lines += [
            f"  worst case {r['provider']}/{r['model']}: {r['worstCalls']} requests, {r['worstInputTokens']:,} input tokens"
            for r in one["writers"]
            if r["chosen"]
        ]
        if not any(r["chosen"] for r in one["writers"]):
            lines.append("  the chosen provider is offline (the heuristic query writer): no paid calls; the rows are for comparison")
        check = one.get("answerability")
        if check is not None:
            lines.append(f"phase one's answerability check (rough: {check['queries']} on-topic queries, one passage each):")
            lines += [head] + [row(r) for r in check["judges"]]
    two = report["phaseTwo"]
    if two["precision"] == "pool":
        lines.append(f"calibration (pool and probes labelled): judge mode {report['judgeMode']}, {report['trials']} trial(s)")
    else:
        what = {"rough": "rough: a query set not yet written", "recorded": "the run's recorded results"}.get(
            two["precision"], "searched the index"
        )
        searches = "answers" if two["precision"] == "recorded" else "searches"
        lines.append(
            f"phase two ({what}): {two['queries']} queries, {two['searches']} {searches}"
            + (f", {two['searchFailures']} failed" if two["searchFailures"] else "")
            + f"; judge mode {report['judgeMode']}, {report['trials']} trial(s), up to {report['searchLimit']} results each"
        )
        if two.get("firstSearchFailure"):
            lines.append(
                f"warning: {two['searchFailures']} searches failed (the run writes each as an error line); the first: {two['firstSearchFailure']}"
            )
    # the run's own judge, under its own cache key (never another provider's comparison row)
    first = two.get("runJudge") or next((j for j in two["judges"] if j["chosen"]), None)
    if first is not None and two["precision"] != "pool":
        lines.append(
            f"labels ({first['provider']}/{first['model']}): {first['labelsToJudge']:,} to judge, "
            f"{first['labelsCached']:,} in the judgment cache, {first['humanLabels']:,} human"
        )
        why = cache_note(two.get("judgmentCache"), first)
        if why:
            lines.append(why)
    lines += [head] + [row(r) for r in two["judges"]]
    lines += [note for note in (caching_note(r) for r in two["judges"]) if note]
    lines += [f"warning: {r['provider']}/{r['model']}: {r['sizing']}" for r in two["judges"] if r.get("sizing")]
    if not any(r["chosen"] for r in two["judges"]):
        lines.append("the chosen provider is offline (the heuristic judge): no paid calls; the rows show what an LLM judge would cost")
    lines.append("* the judge the run would use; the other rows are each provider's default model, for comparison")
    mode = report.get("runMode", "cached")
    lines.append(
        f"the run would pay the '{mode}' column: the judge marks its prompt cacheable"
        + (", and --batch sends it through the batch API" if mode == "batch+cached" else "; --batch would pay 'batch+cached'")
    )
    cap = report.get("maxBudgetUsd")
    chosen = next((r for r in two["judges"] if r["chosen"]), None)
    worst = chosen["costUsd"][mode]["worst"] if chosen is not None else None
    if cap is not None and worst is not None and worst > cap:
        lines.append(
            f"warning: the worst case in that mode ({_usd(worst)}) is above --max-budget-usd ${cap:,.2f}: calls are refused once "
            "the budget cannot cover their worst case, so the run may stop early"
        )
    lines += [f"assumption: {a}" for a in report["assumptions"]]
    return lines


def cache_note(held: dict[str, Any] | None, judge: dict[str, Any]) -> str | None:
    """Why ``judge`` finds no label in the judgment cache when it has labels to judge (cache off, not written,
    empty, other judges' labels only, or other queries or texts); None otherwise."""
    if held is None or judge["labelsCached"] or not judge["labelsToJudge"]:
        return None
    state, path = held.get("state"), held.get("path")
    if state == "off":
        return "why 0: the judgment cache is off (--no-cache)"
    if state == "absent":
        return f"why 0: no judgment cache at {path} yet (the first run writes it)"
    if not held.get("labels"):
        return f"why 0: the judgment cache {path} holds no labels yet"
    mine = f"{judge['provider']}/{judge['model']}"
    by_judge = held.get("labelsByJudge") or {}
    if by_judge.get(mine):
        return (
            f"why 0: the judgment cache {path} holds {by_judge[mine]:,} labels of {mine}, none for these queries and texts "
            "(another query set, or the documents changed)"
        )
    others = ", ".join(f"{name} ({n:,})" for name, n in sorted(by_judge.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
    return (
        f"why 0: the judgment cache {path} holds {held['labels']:,} labels, none this judge can reuse: {others}; a label is reused "
        "only by the same provider and model, prompts, sampling and judge mode"
    )


def print_report(report: dict[str, Any], printer: Printer, as_json: bool) -> None:
    if as_json:
        printer.out(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for line in report_lines(report):
            printer.out(line)
