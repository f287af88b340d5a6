"""The test suite's own layout (docs/development.md, "How the suite is organised"): tests/ mirrors judge_runner/,
one folder per package, whole-program checks in e2e/ and project/, shared helpers in support/; no test module
imports another; the MiniLM lists of tests/conftest.py name tests that exist."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import MINILM_ALONE, MINILM_TESTS

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "judge_runner"
WHOLE_PROGRAM = {"e2e", "project"}  # tests of no one package: whole jobs through the CLI; the repository itself
NOT_TESTS = {"support", "data"}  # shared helpers, fakes and engines; data files


def modules_of_tests() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def packages() -> set[str]:
    """judge_runner's packages as paths (``app``, ``app/label``, ...) plus ``config`` (config.py)."""
    found = {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py")} - {"."}
    return found | {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function, relative imports resolved (``from a import
    b`` counts ``a.b`` too, which is a module when ``b`` is one)."""
    package = path.parent.relative_to(ROOT).parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], node.module or ""] if node.level else [node.module or ""]).strip(
                "."
            )
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def is_test_module(module: str) -> bool:
    """Whether ``module`` is a file ``test_*.py`` of this repository."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return path.name.startswith("test_") and path.is_file()


def test_no_test_module_imports_another():
    offenders = {path.relative_to(ROOT).as_posix(): sorted(filter(is_test_module, imported_modules(path))) for path in modules_of_tests()}
    assert not {k: v for k, v in offenders.items() if v}, "move what they share into tests/support/ or a conftest.py"


def test_every_package_has_its_folder_and_every_test_lives_in_one():
    folders = {p.parent.relative_to(TESTS).as_posix() for p in modules_of_tests()}
    wanted = packages()
    assert wanted - folders == set(), f"packages of judge_runner/ with no tests/ folder: {sorted(wanted - folders)}"
    stray = {f for f in folders if f not in wanted and f.split("/")[0] not in WHOLE_PROGRAM}
    assert not stray, f"test folders that mirror no package of judge_runner/: {sorted(stray)}"
    assert not list(TESTS.glob("test_*.py")), "a test module at the top of tests/: move it into its package's folder"
    for folder in NOT_TESTS:
        assert not list((TESTS / folder).rglob("test_*.py")), f"tests/{folder}/ holds no tests"


def test_every_test_folder_is_a_package():
    # test modules are imported by their dotted path (tests.search.test_builtin), so two folders may hold
    # files of one name; a folder without __init__.py would be imported by its base name and collide
    for folder in {p.parent for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts}:
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)} has no __init__.py"


def test_the_minilm_lists_name_tests_that_exist():
    for prefix in MINILM_TESTS + MINILM_ALONE:
        file, _, name = prefix.partition("::")
        path = ROOT / file
        assert path.is_file(), f"{prefix}: no such file (tests/conftest.py)"
        if name:
            defined = {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.FunctionDef)}
            assert name in defined, f"{prefix}: no such test (tests/conftest.py)"
