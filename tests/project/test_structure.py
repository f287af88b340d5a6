"""The package's structure, as docs/design.md describes it: packages by concern, layers kept by the
import-linter contracts in pyproject.toml, no import cycle (imports inside functions and under
``TYPE_CHECKING`` count too), no function-local import of the package's own modules, at most three modules
at the top of ``judge_runner/`` and none over 600 lines."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "judge_runner"
MAX_MODULE_LINES = 600
MAX_TOP_MODULES = 3


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (module -> modules it imports): every strongly connected component
    of more than one module, and every module that imports itself (Tarjan 1972, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, as grimp reads them: every import statement, inside
    functions and under ``TYPE_CHECKING`` included."""
    graph = grimp.build_graph(package, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_no_import_cycle_counting_imports_inside_functions():
    cycles = strongly_connected(import_graph("judge_runner"))
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_sees_imports_inside_functions(tmp_path, monkeypatch):
    """A cycle held open only by an import inside a function (the kind this package had) is found."""
    pkg = tmp_path / "knot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from knot.b import B\n\nA = 1\n")
    (pkg / "b.py").write_text("B = 2\n\n\ndef late():\n    from knot.a import A\n\n    return A\n")
    (pkg / "c.py").write_text("from knot import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert strongly_connected(import_graph("knot")) == [["knot.a", "knot.b"]]


def test_the_layers_and_independence_contracts_are_kept():
    """``lint-imports`` (import-linter) with the contracts of pyproject.toml, as .ci/run runs it."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def layer_contract(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The modules named in the package-wide layers contract of ``pyproject``: the one ``layers``
    contract without ``containers``, every ``|``- or ``:``-joined sibling on its own."""
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers" and not c.get("containers")]
    return [name.strip() for layer in layers for name in layer.replace(":", "|").split("|")]


def unlayered(package: Path, named: Iterable[str]) -> list[str]:
    """The packages and top-level modules of ``package`` (a folder) that ``named`` does not name."""
    root = package.name
    found = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    found += [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    return sorted(f"{root}.{name}" for name in found if f"{root}.{name}" not in set(named))


def test_every_package_is_named_in_the_layer_contract():
    """A new package (or top-level module) must take its place in the layers; one the contract does not
    name is checked by nothing."""
    assert unlayered(PACKAGE, layer_contract()) == []


def test_the_layer_coverage_check_can_fail(tmp_path):
    (tmp_path / "knot" / "old").mkdir(parents=True)
    (tmp_path / "knot" / "new").mkdir()
    for init in ("__init__.py", "old/__init__.py", "new/__init__.py", "top.py"):
        (tmp_path / "knot" / init).write_text("")
    (tmp_path / "knot" / "data").mkdir()  # a folder that is not a package
    assert unlayered(tmp_path / "knot", ["knot.old", "knot.top"]) == ["knot.new"]
    assert unlayered(PACKAGE, [m for m in layer_contract() if m != "judge_runner.measures"]) == ["judge_runner.measures"]


def own_imports_inside_functions(source: str, module: str) -> list[str]:
    """``module:line imported`` for every import of a ``judge_runner`` module inside a function of
    ``source`` (relative imports resolved against ``module``)."""
    package = module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            names: list[str] = []
            if isinstance(inner, ast.Import):
                names = [a.name for a in inner.names]
            elif isinstance(inner, ast.ImportFrom):
                base = package.rsplit(".", inner.level - 1)[0] if inner.level > 1 else package
                names = [(f"{base}.{inner.module}" if inner.module else base) if inner.level else (inner.module or "")]
            out += [f"{module}:{inner.lineno} {n}" for n in names if n == "judge_runner" or n.startswith("judge_runner.")]
    return sorted(set(out))


def modules() -> list[tuple[str, Path]]:
    return [(".".join(p.relative_to(ROOT).with_suffix("").parts), p) for p in sorted(PACKAGE.rglob("*.py"))]


def test_no_function_local_import_of_the_packages_own_modules():
    """An import inside a function is for a heavy or optional third-party module (torch, scipy, an SDK),
    never for one of ours: that is how a cycle hides."""
    found = [hit for name, path in modules() for hit in own_imports_inside_functions(path.read_text(encoding="utf-8"), name)]
    assert found == []


def test_the_local_import_check_can_fail():
    source = textwrap.dedent(
        """
        import json

        def f():
            from judge_runner.search import trec
            from . import printer
            import torch
            return trec, printer, torch, json
        """
    )
    assert own_imports_inside_functions(source, "judge_runner.core.models") == [
        "judge_runner.core.models:5 judge_runner.search",
        "judge_runner.core.models:6 judge_runner.core",
    ]


def test_at_most_three_modules_at_the_top_and_none_over_600_lines():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    long = {name: n for name, path in modules() if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


@pytest.mark.parametrize("package", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
def test_every_package_says_what_it_holds(package):
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc) > 40 and "TODO" not in doc, package


def test_config_imports_only_the_settings_vocabularies():
    """``config.py`` holds settings, not behaviour: of the package it imports only the core, the search's
    settings, the provider registry's names and prices and the embedder registry's kinds, never a backend, a
    provider or a judge."""
    graph = import_graph("judge_runner")
    allowed = {
        "judge_runner.search.settings",
        "judge_runner.search.redact",
        "judge_runner.llm.registry",
        "judge_runner.llm.pricing",
        "judge_runner.embed.registry",
    }
    assert {m for m in graph["judge_runner.config"] if not m.startswith("judge_runner.core.")} <= allowed


def test_no_module_cites_a_document_that_is_not_in_the_repository():
    """Contracts live in docs/ (docs/design.md); DESIGN.md is not in this repository."""
    assert [name for name, path in modules() if "DESIGN.md" in path.read_text(encoding="utf-8")] == []


def test_the_cli_starts_without_the_heavy_libraries():
    """Loading the command line imports neither the embedding model's stack (torch, sentence-transformers) nor
    calibrate's statistics (scipy, scikit-learn), nor pandas or matplotlib: each costs seconds on every
    ``judge-runner`` start, even ``--help``. They are imported where they are used."""
    heavy = ("torch", "sentence_transformers", "transformers", "scipy", "sklearn", "pandas", "matplotlib")
    code = f"import sys, judge_runner.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "[]"


def test_no_docstring_holds_a_lone_surrogate():
    """Python 3.13 cleans docstrings as it compiles and refuses one holding a lone surrogate (a ``"\\ud83d"``
    written unescaped): the whole module then fails to import. Write such an escape as ``\\\\ud83d``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                if any(0xD800 <= ord(c) <= 0xDFFF for c in doc):
                    found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}")
    assert not found, f"docstrings with a lone surrogate: {found}"
