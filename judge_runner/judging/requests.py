"""The judge's requests under the label-first protocol (issue 14): what each call sends and how its
reply is checked. Pure functions: no provider, no I/O beyond reading the shipped prompts and schemas.

Three calls:

- **pointwise** (default): one document per call, ``prompts/judge_label_{system,user}.md``, reply
  ``schemas/judge_label.schema.json`` through the ``record_label`` tool;
- **batched**: every result of one query in one call, in a seeded random order, with local ids
  ``D1..DN`` in the order shown, ``prompts/judge_labels_user.md``, reply
  ``schemas/judge_labels.schema.json`` (``record_labels``), mapped back to the search's order. The tool's
  schema is the same whatever N (so the tools and the system prompt are one cacheable prefix for every
  call); the count and the ids shown are in the message and checked here (:attr:`JudgeRequest.check_schema`);
- **list**: one call per query after the labels, ``prompts/judge_list_{system,user}.md``, reply
  ``schemas/judge_list_verdict.schema.json`` (``record_list_verdict``): coverage, snippetQuality and the
  holistic judge* figures.

The label calls' system prompt holds the rubric people are shown too (``prompts/judge_rubric.md``, read by
:mod:`judge_runner.judging.rubric` for the labelling page) and the output rules of one of two
:data:`OUTPUTS`: ``reason-first`` (every run) or ``grade-only`` (UMBRELA's and the DNA prompt's form, for
``calibrate --compare-output``), whose schema has no ``reason``.

No request carries the search's rank or engine score: the label calls take
:class:`judge_runner.judging.fence.RenderedDocument` values, which hold neither. The list-level call shows the
results in the search's order (it needs the order for its holistic ranking figure; it grades no
result, so the order cannot bias a label) with ids, never rank numbers or scores. Each call gets a
fresh fence delimiter. The query and intent (written by the generating model, which read the corpus)
are neutralised like documents.
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
    """One call to the judge: the system prompt, the user message, the forced tool's name and the input
    schema sent (the same for every call of a kind), the fence delimiter used, and in batched/list mode
    the local ids in the order shown with ``shown_order[i]`` = the index (in the search's order) of the
    i-th document shown. ``check_schema``: what a reply is checked against locally (batched: the count
    and the ids shown pinned; None: ``schema``); ``output``: the label calls' output rules."""

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
    """Hex sha256 of a shipped schema file's UTF-8 text (as :func:`resources.prompt_sha256` for prompts)."""
    return hashlib.sha256((resource_dir("schemas") / name).read_text(encoding="utf-8").encode("utf-8")).hexdigest()


def protocol_hashes(mode: JudgeMode, output: Output = "reason-first") -> tuple[dict[str, str], dict[str, str]]:
    """``({prompt file: sha256}, {schema file: sha256})`` of everything a run in ``mode``
    (``"pointwise"`` or ``"batched"``) sends: the label prompts (the rubric and the ``output`` rules
    included) and schema plus the list-level ones. For the judge fingerprint in ``run_start`` and the
    judgment-cache key. Raises ValueError for a mode outside :data:`~judge_runner.core.models.JUDGE_MODES`
    (a library caller's typo: settings are checked when loaded)."""
    if mode not in JUDGE_MODES:
        raise ValueError(f"judge mode must be one of {', '.join(JUDGE_MODES)}, got {mode!r}")
    prompts = {name: prompt_sha256(name) for name in (*PROMPTS[mode], RUBRIC, OUTPUTS[output], *PROMPTS["list"])}
    schemas = {name: schema_sha256(name) for name in (SCHEMAS[mode], SCHEMAS["list"])}
    return prompts, schemas


def _inline(text: str, cap: int) -> str:
    """Untrusted short text (query, intent, a reason, a path) as one neutralised line of at most ``cap``
    characters."""
    flat = " ".join(neutralise(text or "")[0].split())
    return flat if len(flat) <= cap else flat[: cap - 1] + "…"


def local_ids(n: int) -> list[str]:
    """``["D1", ..., "Dn"]``. Raises ValueError unless 0 <= n <= MAX_BATCH."""
    if not 0 <= n <= MAX_BATCH:
        raise ValueError(f"a batch holds 0-{MAX_BATCH} documents, got {n}")
    return [f"D{i}" for i in range(1, n + 1)]


def batch_seed(run_seed: int | str, query_id: str, trial: int) -> int:
    """A 64-bit seed for one query's shuffle in one trial, from the run's seed: stable across processes
    and Python versions (sha256, not ``hash()``), different for every query and trial."""
    digest = hashlib.sha256(f"{run_seed}\x00{query_id}\x00{trial}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def shuffled_order(n: int, seed: int) -> list[int]:
    """A permutation of ``range(n)`` drawn with :class:`random.Random` (``seed`` from :func:`batch_seed`):
    ``order[i]`` is the search-order index of the i-th document shown. For n >= 2 the identity (the
    search's own order) is redrawn, so the shown order never reveals the ranking."""
    rng = random.Random(seed)
    order = list(range(n))
    for _ in range(100):
        rng.shuffle(order)
        if n < 2 or order != list(range(n)):
            break
    return order


def label_system_prompt(output: Output = "reason-first") -> str:
    """The label calls' system prompt (pointwise and batched): ``prompts/judge_label_system.md`` with the
    rubric and the ``output`` rules in it."""
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
    """The input schema of the label tool sent in ``mode`` (``pointwise`` or ``batched``): the shipped
    schema for ``output``, the same for every call (no count or id pinned)."""
    schema = pinned_schema(SCHEMAS[mode], "", None)
    if mode == "batched":
        items = schema["properties"]["labels"]["items"]
        schema["properties"]["labels"]["items"] = _label_fields(items, output)
        return schema
    return _label_fields(schema, output)


def _example(fields: dict[str, Any], doc_id: str | None = None) -> str:
    """A label as the JSON fallback is asked to write it: the schema's keys in order, placeholder values."""
    placeholder = {"id": doc_id, "reason": "...", "injectionSuspected": False, "relevance": 0}
    return json.dumps({k: placeholder[k] for k in fields["properties"]})


def pointwise_request(
    query: str, intent: str, document: RenderedDocument, delimiter: str | None = None, output: Output = "reason-first"
) -> JudgeRequest:
    """The request labelling one document (pointwise mode), under the ``output`` rules. ``delimiter``
    defaults to a fresh :func:`fence.new_delimiter`; pass one only in tests."""
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
    """The request labelling every document of one query in one call (batched mode), under the
    ``output`` rules. ``documents`` are in the search's order; ``order`` (from :func:`shuffled_order`) is
    the order they are shown in. Ids ``D1..DN`` follow the shown order. The schema sent is the same for
    every N; the one a reply is checked against pins ``labels`` to N items and ``id`` to the shown ids.
    Raises ValueError when ``order`` is not a permutation of the documents or there are none."""
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
    """One labelled result for the list-level call: the search's snippet rendered with
    :func:`fence.render_document` (source, anchor, snippet text), its fixed label and the label's
    reason."""

    snippet: RenderedDocument
    label: int
    reason: str = ""


def list_request(
    query: str, intent: str, expected_sources: Sequence[str], items: Sequence[ListItem], delimiter: str | None = None
) -> JudgeRequest:
    """The list-level request for one query: the labelled results in the search's order (ids D1..DN,
    no rank numbers or scores), the intent and the expected sources. Raises ValueError on a label
    outside 0-3."""
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
    """The delimiter-free content of a list-level request, for its judgment-cache key (``shown`` with
    mode ``"list"``): the expected sources, then each result's label, reason and shown snippet in the
    search's order. Equal inputs give equal text whatever delimiter the request drew."""
    parts = ["expected: " + "\n".join(expected_sources)]
    parts += [f"label {item.label}\nreason: {item.reason}\n{item.snippet.shown}" for item in items]
    return "\n\x1e\n".join(parts)


def _schema_problems(data: object, schema: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(data)][:20]


def reply_problems(data: object, request: JudgeRequest) -> list[str]:
    """Everything wrong with a raw reply to ``request`` (empty when valid): schema errors (against
    :attr:`JudgeRequest.check_schema`: counts and ids pinned), in batched mode an id missing or repeated,
    in list mode a non-finite number."""
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
    """How the model wrote one label: ``grade-only`` when no reason was asked, else ``reason-first`` or
    ``grade-first`` by the order of its keys as written (parsed JSON keeps it). Strict structured output
    writes keys in the schema's order; a fallback reply may not."""
    if output == "grade-only" or "reason" not in label or "relevance" not in label:
        return "grade-only"
    keys = list(label)
    return "reason-first" if keys.index("reason") < keys.index("relevance") else "grade-first"


def labels_in_search_order(data: dict, request: JudgeRequest) -> list[dict]:
    """A validated batched reply's labels (``{reason, injectionSuspected, relevance, shownAs, order}``) put back
    in the search's order: item k belongs to the k-th result the search returned; ``shownAs`` is its
    local id. Raises ValueError when the reply does not name every shown id once (call
    :func:`reply_problems` first)."""
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
    """Anything the protocol wrote (outside the fences) that looks like a rank number or an engine score
    (``[3]``, ``rank 2``, ``score 0.93``): empty for every request this module builds. Inside a fence is
    the document's own text, which may say anything (its spoofed headers are neutralised by
    :mod:`judge_runner.judging.fence`). For the fake server's request-log check and for tests."""
    return [m.group(0) for m in _RANK_OR_SCORE.finditer(outside_fences(request.user, request.delimiter))]


def load_protocol_schema(mode: str) -> dict[str, Any]:
    """The unpinned schema of ``mode`` (``pointwise``, ``batched`` or ``list``) as a dict."""
    return load_schema(SCHEMAS[mode])
