"""Every cross-reference in the package's docstrings and comments names something that exists where it
says.

A cross-reference is a backticked dotted name (``x``, :class:`~x`, :func:`x`, ...) that starts with
``judge_runner.``, one of its packages (``judging.fence.fence``) or ``config.``. It resolves when its
module imports and the next name is defined in that module itself (a class, a function or an assignment
at its top level: a name the module only imports is a stale pointer to where the thing used to live),
and every further name is an attribute, an annotated field or a pydantic field of the one before. A
file name in backticks (``corpus.jsonl``, ``config.py``) is not a reference. Names relative to a
sibling module (``fence.RenderedDocument``) are left out: they are too often a variable's attribute
(``options.concurrency``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "judge_runner"
FILE_SUFFIXES = {"py", "json", "jsonl", "md", "toml", "sqlite", "txt", "yaml", "html", "csv", "trec", "qrels"}
TOP = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()) + sorted(
    p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"
)
REFERENCE = re.compile(r"`~?((?:judge_runner\.)?(?:" + "|".join(TOP) + r")\.[A-Za-z_][\w.]*)(?:\(\))?`")


def references(text: str) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every cross-reference in ``text``."""
    return [(i, m.group(1)) for i, line in enumerate(text.splitlines(), 1) for m in REFERENCE.finditer(line)]


@cache
def defined_in(module: str) -> frozenset[str]:
    """The names ``module`` defines at its top level (not those it imports), from its source."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    names: set[str] = set()
    body = ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body
    branches = [inner for top in body if isinstance(top, ast.If) for inner in top.body + top.orelse]  # TYPE_CHECKING alternatives
    for node in body + branches:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


def stale(name: str) -> str | None:
    """None when ``name`` resolves (see the module docstring), else why not."""
    parts = (name if name.startswith("judge_runner.") else f"judge_runner.{name}").split(".")
    if parts[-1] in FILE_SUFFIXES:
        return None
    for cut in range(len(parts), 1, -1):
        module = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module)
        except ImportError:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        if rest[0] not in defined_in(module):
            return f"{module} does not define {rest[0]}"
        obj = getattr(obj, rest[0])
        for attr in rest[1:]:
            fields = {**(getattr(obj, "__annotations__", None) or {}), **(getattr(obj, "model_fields", None) or {})}
            if attr in fields:
                return None
            if not hasattr(obj, attr):
                return f"{'.'.join(parts[: parts.index(attr)])} has no {attr}"
            obj = getattr(obj, attr)
        return None
    return f"no module {'.'.join(parts[:2])}"


def package_references() -> list[tuple[str, int, str]]:
    return [
        (str(path.relative_to(ROOT)), line, name)
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name in references(path.read_text(encoding="utf-8"))
    ]


def test_there_are_cross_references_to_check():
    assert len(package_references()) > 200


def test_every_cross_reference_resolves():
    found = [f"{path}:{line} {name}: {why}" for path, line, name in package_references() if (why := stale(name))]
    assert found == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (":class:`~judge_runner.judging.protocol.Judge`", None),
        ("``judging.fence.RenderedDocument.source``", None),
        ("``config.Settings.cache_path``", None),
        ("(``corpus.jsonl``)", None),
        (":class:`~judge_runner.app.roles.Judge`", "judge_runner.app.roles does not define Judge"),  # imported there, not defined
        (":func:`judge_runner.llm.batch.batching_provider`", "judge_runner.llm.batch does not define batching_provider"),
        ("``judging.protocol.Judge.grade``", "judge_runner.judging.protocol.Judge has no grade"),
        ("``runs.nowhere.Thing``", "judge_runner.runs does not define nowhere"),
    ],
)
def test_the_cross_reference_check_can_fail(text, why):
    ((_, name),) = references(text)
    assert stale(name) == why
