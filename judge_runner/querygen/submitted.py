"""A submitted query set, checked as every writer's answer is: the schema with the count pinned
(:func:`check_query_set`), sources that exist (:func:`filter_queries`), and its identity
(:func:`query_set_sha256`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema

from judge_runner.core.models import Query
from judge_runner.core.resources import pinned_schema
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS, normalize_source, walk_corpus

__all__ = ["check_query_set", "filter_queries", "query_set_sha256", "submit_schema"]


def submit_schema(count: int | None) -> dict:
    """``schemas/query_set.schema.json`` pinned to ``count`` queries (None: any), without the ``card``."""
    schema = pinned_schema("query_set.schema.json", "queries", count)
    schema["properties"].pop("card", None)
    return schema


def check_query_set(data: object, count: int | None = None) -> list[str]:
    """Schema problems (empty when valid), as short messages the model can act on."""
    validator = jsonschema.Draft202012Validator(submit_schema(count))
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(data)]
    if not errors:
        ids = [q["id"] for q in data["queries"]]  # type: ignore[index]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            errors.append(f"query ids must be unique; repeated: {', '.join(duplicates)}")
    return errors[:20]


def filter_queries(data: dict, root: Path, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS) -> tuple[list[Query], list[dict]]:
    """``(kept, dropped)``: queries whose expected sources all exist; dropped entries are ``{"id", "query",
    "reason"}``. Off-topic queries must have no source, others at least one."""
    corpus = {f.source for f in walk_corpus(root, extensions=extensions).files}
    kept: list[Query] = []
    dropped: list[dict] = []
    for raw in data["queries"]:
        sources = [normalize_source(s.strip().lstrip("./") if s.startswith("./") else s.strip()) for s in raw["expectedSources"]]
        missing = [s for s in sources if s not in corpus]
        reason = None
        if raw["queryType"] == "off-topic" and sources:
            reason = "off-topic query with expected sources"
        elif raw["queryType"] != "off-topic" and not sources:
            reason = "no expected sources"
        elif missing:
            reason = f"expected sources not in the corpus: {', '.join(missing)}"
        if reason:
            dropped.append({"id": raw["id"], "query": raw["query"], "reason": reason})
        else:
            kept.append(Query(**{**raw, "expectedSources": sources}))
    return kept, dropped


def query_set_sha256(queries: list[Query]) -> str:
    """sha256 of the canonical JSON: equal iff the queries are equal."""
    canonical = json.dumps([q.model_dump() for q in queries], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
