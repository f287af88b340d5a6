"""The layering rules, read from the source with ``ast`` (imports inside functions count too).

- ``llm/`` (providers, retry, budget, prices, registry) imports nothing of judge-runner outside ``llm/``:
  it never reaches into the search under test or the corpus.
- The neutral modules (text normalisation, embedder, DSN redaction, search settings, the data models)
  import neither the search, the corpus nor the LLM layer.
- ``config.py`` imports no search or corpus code and no provider (only the registry's names).
- ``search/`` and ``corpus/`` know nothing of the judge, the LLM layer or the roles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "judge_runner"


def imported_modules(path: Path) -> set[str]:
    """Every ``judge_runner...`` module a file imports, absolute names (``from . import x`` resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(("judge_runner", *path.relative_to(PACKAGE).with_suffix("").parts[:-1]))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # ``from judge_runner import search``
    return {m for m in found if m == "judge_runner" or m.startswith("judge_runner.")}


def files(*parts: str) -> list[Path]:
    target = PACKAGE.joinpath(*parts)
    return sorted(target.rglob("*.py")) if target.is_dir() else [target]


def violations(paths: list[Path], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    out = []
    for path in paths:
        for module in sorted(imported_modules(path)):
            if any(module == f or module.startswith(f + ".") for f in forbidden) and not any(
                module == a or module.startswith(a + ".") for a in allowed
            ):
                out.append(f"{path.relative_to(PACKAGE.parent)} imports {module}")
    return out


NOT_LLM = (
    "judge_runner.search",
    "judge_runner.corpus",
    "judge_runner.heuristic",
    "judge_runner.app.roles",
    "judge_runner.judging.llm_judge",
    "judge_runner.querygen.agent",
    "judge_runner.evaluation.loop",
    "judge_runner.cli",
    "judge_runner.config",
    "judge_runner.search.embedding",
    "judge_runner.core.textproc",
    "judge_runner.runs.write",
    "judge_runner.app.jobs",
)


def test_llm_layer_reaches_nowhere_sideways():
    assert violations(files("llm"), NOT_LLM) == []


@pytest.mark.parametrize("module", ["textproc.py", "embedding.py", "dsn.py", "search_settings.py", "models.py"])
def test_neutral_modules_import_no_search_corpus_or_llm(module):
    assert violations(files(module), ("judge_runner.search", "judge_runner.corpus", "judge_runner.llm", "judge_runner.heuristic")) == []


def test_config_imports_no_backend_and_no_provider():
    forbidden = (
        "judge_runner.search",
        "judge_runner.corpus",
        "judge_runner.heuristic",
        "judge_runner.search.embedding",
        "judge_runner.llm",
    )
    assert violations(files("config.py"), forbidden, allowed=("judge_runner.llm.registry", "judge_runner.llm.pricing")) == []


@pytest.mark.parametrize("folder", ["search", "corpus"])
def test_search_and_corpus_know_nothing_of_the_judge(folder):
    forbidden = (
        "judge_runner.llm",
        "judge_runner.heuristic",
        "judge_runner.app.roles",
        "judge_runner.judging.llm_judge",
        "judge_runner.querygen.agent",
        "judge_runner.evaluation.loop",
        "judge_runner.cli",
        "judge_runner.config",
    )
    assert violations(files(folder), forbidden) == []


def test_the_checker_sees_imports_inside_functions(tmp_path, monkeypatch):
    """The rule would catch a lazy import like the one config.py used to have."""
    fake = PACKAGE / "llm" / "retry.py"
    source = "def f():\n    from judge_runner.search.postgres import redact_dsn\n    from ..corpus import walk\n"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    assert violations([fake], NOT_LLM) == [
        "judge_runner/llm/retry.py imports judge_runner.corpus",
        "judge_runner/llm/retry.py imports judge_runner.corpus.walk",
        "judge_runner/llm/retry.py imports judge_runner.search.postgres",
        "judge_runner/llm/retry.py imports judge_runner.search.postgres.redact_dsn",
    ]


def test_the_cli_starts_without_the_heavy_libraries():
    """Loading the command line imports neither the embedding model's stack (torch, sentence-transformers) nor
    calibrate's statistics (scipy, scikit-learn): each costs seconds on every ``judge-runner`` start, even
    ``--help``. They are imported where they are used."""
    import subprocess
    import sys

    heavy = ("torch", "sentence_transformers", "transformers", "scipy", "sklearn", "pandas", "matplotlib")
    code = f"import sys, judge_runner.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    env = {"PYTHONPATH": str(PACKAGE.parent), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "[]"
