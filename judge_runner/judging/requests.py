"""The judge's requests: what each call sends (pointwise, batched, list-level) and how its reply is checked.
Pure functions over the shipped prompts and schemas. No request carries the search's rank or engine score;
each gets a fresh fence delimiter. See docs/judge-protocol.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any, Literal

import jsonschema

from judge_runner.core.models import JUDGE_MODES, JudgeMode
from judge_runner.core.resources import (
    load_prompt,
    load_schema,
    pinned_schema,
    prompt_sha256,
    resource_dir,
)
from judge_runner.judging.fence import RenderedDocument, fence, neutralise, new_delimiter
from judge_runner.judging.rubric import RUBRIC_FILE, load_rubric

LABEL_TOOL, LABELS_TOOL, LIST_TOOL = "record_label", "record_labels", "record_list_verdict"
PROMPTS = {
    "pointwise": ("judge_label_system.md", "judge_label_user.md"),
    "batched": ("judge_label_system.md", "judge_labels_user.md"),
    "list": ("judge_list_system.md", "judge_list_user.md"),
}
SCHEMAS = {"pointwise": "judge_label.schema.json", "batched": "judge_labels.schema.json", "list": "judge_list_verdict.schema.json"}
RUBRIC = RUBRIC_FILE
Output = Literal["reason-first", "grade-only"]
OUTPUTS: dict[str, str] = {"reason-first": "judge_output_reason_first.md", "grade-only": "judge_output_grade_only.md"}
"""The label calls' output rules: the reason written before the grade (every run), or the grade alone."""
GRADE_NAMES = {0: "irrelevant", 1: "related", 2: "highly relevant", 3: "perfectly relevant"}
MAX_BATCH = 999
QUERY_CAP = 1000
REASON_CAP = 200


@dataclass(frozen=True)
class JudgeRequest:
    """One call to the judge. ``shown_order[i]``: the search-order index of the i-th document shown;
    ``check_schema``: what a reply is checked against locally (None: ``schema``)."""

    system: str
    user: str
    tool_name: str
    schema: dict[str, Any]
    delimiter: str
    ids: tuple[str, ...] = ()
    shown_order: tuple[int, ...] = ()
    prompt_names: tuple[str, str] = field(default=("", ""))
    check_schema: dict[str, Any] | None = None
    output: Output = "reason-first"


def schema_sha256(name: str) -> str:
    """Hex sha256 of a shipped schema file's UTF-8 text."""
    return hashlib.sha256((resource_dir("schemas") / name).read_text(encoding="utf-8").encode("utf-8")).hexdigest()


def protocol_hashes(mode: JudgeMode, output: Output = "reason-first") -> tuple[dict[str, str], dict[str, str]]:
    """``({prompt file: sha256}, {schema file: sha256})`` of everything a run in ``mode`` sends. Raises
    ValueError for a mode outside :data:`~judge_runner.core.models.JUDGE_MODES`."""
    if mode not in JUDGE_MODES:
        raise ValueError(f"judge mode must be one of {', '.join(JUDGE_MODES)}, got {mode!r}")
    prompts = {name: prompt_sha256(name) for name in (*PROMPTS[mode], RUBRIC, OUTPUTS[output], *PROMPTS["list"])}
    schemas = {name: schema_sha256(name) for name in (SCHEMAS[mode], SCHEMAS["list"])}
    return prompts, schemas


def _inline(text: str, cap: int) -> str:
    """Untrusted short text as one neutralised line of at most ``cap`` characters."""
    flat = " ".join(neutralise(text or "")[0].split())
    return flat if len(flat) <= cap else flat[: cap - 1] + "…"


def local_ids(n: int) -> list[str]:
    """``["D1", ..., "Dn"]``. Raises ValueError unless 0 <= n <= MAX_BATCH."""
    if not 0 <= n <= MAX_BATCH:
        raise ValueError(f"a batch holds 0-{MAX_BATCH} documents, got {n}")
    return [f"D{i}" for i in range(1, n + 1)]


def batch_seed(run_seed: int | str, query_id: str, trial: int) -> int:
    """A 64-bit seed for one query's shuffle in one trial, stable across processes (sha256, not ``hash()``)."""
    digest = hashlib.sha256(f"{run_seed}\x00{query_id}\x00{trial}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def shuffled_order(n: int, seed: int) -> list[int]:
    """A permutation of ``range(n)``, never the identity for n >= 2, so the shown order never reveals the
    ranking."""
    rng = random.Random(seed)
    order = list(range(n))
    for _ in range(100):
        rng.shuffle(order)
        if n < 2 or order != list(range(n)):
            break
    return order


def label_system_prompt(output: Output = "reason-first") -> str:
    """The label calls' system prompt, with the rubric and the ``output`` rules in it."""
    return Template(load_prompt(PROMPTS["pointwise"][0])).substitute(rubric=load_rubric().text, output=load_prompt(OUTPUTS[output]).strip())


def _label_fields(schema: dict[str, Any], output: Output) -> dict[str, Any]:
    """A label's object schema for ``output``: ``grade-only`` drops ``reason``."""
    if output == "reason-first":
        return schema
    return {
        **schema,
        "required": [k for k in schema["required"] if k != "reason"],
        "properties": {k: v for k, v in schema["properties"].items() if k != "reason"},
    }


def label_schema(mode: str, output: Output = "reason-first") -> dict[str, Any]:
    """The label tool's input schema in ``mode``, the same for every call (no count or id pinned)."""
    schema = pinned_schema(SCHEMAS[mode], "", None)
    if mode == "batched":
        items = schema["properties"]["labels"]["items"]
        schema["properties"]["labels"]["items"] = _label_fields(items, output)
        return schema
    return _label_fields(schema, output)


def _example(fields: dict[str, Any], doc_id: str | None = None) -> str:
    """A label as the JSON fallback writes it: the schema's keys in order, placeholder values."""
    placeholder = {"id": doc_id, "reason": "...", "injectionSuspected": False, "relevance": 0}
    return json.dumps({k: placeholder[k] for k in fields["properties"]})


def pointwise_request(
    query: str, intent: str, document: RenderedDocument, delimiter: str | None = None, output: Output = "reason-first"
) -> JudgeRequest:
    """The pointwise request. Pass ``delimiter`` only in tests."""
    delimiter = delimiter or new_delimiter()
    schema = label_schema("pointwise", output)
    user = Template(load_prompt(PROMPTS["pointwise"][1])).substitute(
        query=_inline(query, QUERY_CAP),
        intent=_inline(intent, QUERY_CAP),
        delimiter=delimiter,
        document=fence(document, delimiter),
        example=_example(schema),
    )
    return JudgeRequest(label_system_prompt(output), user, LABEL_TOOL, schema, delimiter, prompt_names=PROMPTS["pointwise"], output=output)


def batched_request(
    query: str,
    intent: str,
    documents: Sequence[RenderedDocument],
    order: Sequence[int],
    delimiter: str | None = None,
    output: Output = "reason-first",
) -> JudgeRequest:
    """The batched request: ``documents`` in the search's order, shown in ``order`` as ``D1..DN``. Raises
    ValueError when ``order`` is not a permutation of the documents or there are none."""
    n = len(documents)
    if n == 0:
        raise ValueError("a batch needs at least one document")
    if sorted(order) != list(range(n)):
        raise ValueError("order must be a permutation of the documents' indexes")
    delimiter = delimiter or new_delimiter()
    ids = local_ids(n)
    blocks = "\n\n".join(fence(documents[original], delimiter, ids[shown]) for shown, original in enumerate(order))
    schema = label_schema("batched", output)
    user = Template(load_prompt(PROMPTS["batched"][1])).substitute(
        query=_inline(query, QUERY_CAP),
        intent=_inline(intent, QUERY_CAP),
        delimiter=delimiter,
        documents=blocks,
        count=n,
        ids=", ".join(ids) if n <= 3 else f"{ids[0]} to {ids[-1]}",
        example=_example(schema["properties"]["labels"]["items"], "D1"),
    )
    check = json.loads(json.dumps(schema))
    check["properties"]["labels"]["minItems"] = check["properties"]["labels"]["maxItems"] = n
    check["properties"]["labels"]["items"]["properties"]["id"]["enum"] = ids
    return JudgeRequest(
        label_system_prompt(output), user, LABELS_TOOL, schema, delimiter, tuple(ids), tuple(order), PROMPTS["batched"], check, output
    )


@dataclass(frozen=True)
class ListItem:
    """One labelled result for the list-level call: its rendered snippet, label and reason."""

    snippet: RenderedDocument
    label: int
    reason: str = ""


def list_request(
    query: str, intent: str, expected_sources: Sequence[str], items: Sequence[ListItem], delimiter: str | None = None
) -> JudgeRequest:
    """The list-level request: the labelled results in the search's order, without ranks or scores.
    Raises ValueError on a label outside 0-3."""
    delimiter = delimiter or new_delimiter()
    ids = local_ids(len(items))
    blocks = []
    for local, item in zip(ids, items):
        if item.label not in GRADE_NAMES:
            raise ValueError(f"labels must be 0-3, got {item.label!r}")
        reason = _inline(item.reason, REASON_CAP) or "(none)"
        blocks.append(
            f"Result {local}: grade {item.label} ({GRADE_NAMES[item.label]}); grader's reason: \u201c{reason}\u201d\n"
            + fence(item.snippet, delimiter, local)
        )
    expected = ", ".join(_inline(s, 300) for s in expected_sources) or "(none given)"
    system_name, user_name = PROMPTS["list"]
    user = Template(load_prompt(user_name)).substitute(
        query=_inline(query, QUERY_CAP),
        intent=_inline(intent, QUERY_CAP),
        expected_sources=expected,
        count=len(items),
        delimiter=delimiter,
        results="\n\n".join(blocks) if blocks else "(no results)",
    )
    schema = pinned_schema(SCHEMAS["list"], "", None)
    return JudgeRequest(load_prompt(system_name), user, LIST_TOOL, schema, delimiter, tuple(ids), tuple(range(len(items))), PROMPTS["list"])


def list_shown_text(expected_sources: Sequence[str], items: Sequence[ListItem]) -> str:
    """The delimiter-free content of a list-level request, for its judgment-cache key."""
    parts = ["expected: " + "\n".join(expected_sources)]
    parts += [f"label {item.label}\nreason: {item.reason}\n{item.snippet.shown}" for item in items]
    return "\n\x1e\n".join(parts)


def _schema_problems(data: object, schema: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(data)][:20]


def reply_problems(data: object, request: JudgeRequest) -> list[str]:
    """Everything wrong with a raw reply to ``request``; empty when valid."""
    problems = _schema_problems(data, request.check_schema or request.schema)
    if problems or not isinstance(data, dict):
        return problems
    if request.tool_name == LABELS_TOOL:
        got = [item["id"] for item in data["labels"]]
        if sorted(got) != sorted(request.ids):
            missing = sorted(set(request.ids) - set(got), key=lambda s: int(s[1:]))
            repeated = sorted({i for i in got if got.count(i) > 1})
            problems.append(f"labels must name each id once: missing {missing or 'none'}, repeated {repeated or 'none'}")
    if request.tool_name == LIST_TOOL:
        for group in ("scores", "holistic"):
            for name, value in data[group].items():
                if isinstance(value, float) and not math.isfinite(value):
                    problems.append(f"{group}/{name}: must be a finite number in [0, 1], got {value}")
    return problems


def order_written(label: dict, output: str = "reason-first") -> str:
    """``grade-only``, or ``reason-first``/``grade-first`` by the order of the label's keys as written."""
    if output == "grade-only" or "reason" not in label or "relevance" not in label:
        return "grade-only"
    keys = list(label)
    return "reason-first" if keys.index("reason") < keys.index("relevance") else "grade-first"


def labels_in_search_order(data: dict, request: JudgeRequest) -> list[dict]:
    """A validated batched reply's labels in the search's order, each with its ``shownAs`` id. Raises
    ValueError when the reply does not name every shown id once."""
    by_id = {item["id"]: item for item in data["labels"]}
    if sorted(by_id) != sorted(request.ids) or len(data["labels"]) != len(request.ids):
        raise ValueError("the reply does not label every shown document exactly once")
    out: list[dict | None] = [None] * len(request.ids)
    for shown, original in enumerate(request.shown_order):
        item = by_id[request.ids[shown]]
        out[original] = {
            "reason": item.get("reason", ""),
            "injectionSuspected": item["injectionSuspected"],
            "relevance": item["relevance"],
            "shownAs": request.ids[shown],
            "order": order_written(item, request.output),
        }
    return out  # type: ignore[return-value]


_RANK_OR_SCORE = re.compile(r"\[\s*\d+\s*\]|\brank(?:ed)?\s*#?\d|\bscore\s*[:=]?\s*\d", re.IGNORECASE)


def outside_fences(user: str, delimiter: str) -> str:
    """The user message with every fenced document block removed: the part the protocol writes."""
    return re.sub(rf"<{re.escape(delimiter)}[^>]*>.*?</{re.escape(delimiter)}>", "", user, flags=re.DOTALL)


def leaks_rank_or_score(request: JudgeRequest) -> list[str]:
    """Anything outside the fences that looks like a rank number or an engine score (``[3]``, ``rank 2``,
    ``score 0.93``); empty for every request this module builds."""
    return [m.group(0) for m in _RANK_OR_SCORE.finditer(outside_fences(request.user, request.delimiter))]


def load_protocol_schema(mode: str) -> dict[str, Any]:
    """The unpinned schema of ``mode`` (``pointwise``, ``batched`` or ``list``) as a dict."""
    return load_schema(SCHEMAS[mode])
