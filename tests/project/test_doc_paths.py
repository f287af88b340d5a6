"""Every repository path the docs and the README name exists: a file or folder of the repository, or of
the package when named from inside it (``cli/label.py``, ``app/steps.make_roles``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "judge_runner"
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".ci"} - {"quality-results", "reports", "labels"}
SUBPACKAGES = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
CODE_RE = re.compile(r"`([^`\n]+)`")
PLACEHOLDER = re.compile(r"[<>*{}$~\s]|://|\.\.\.")


def named_paths(text: str) -> list[str]:
    """Backticked tokens that start with a top-level entry of the repository or a package of judge_runner."""
    out = []
    for token in CODE_RE.findall(text):
        token = token.strip().rstrip(".,;:)")
        token = re.sub(r":\d+(-\d+)?$", "", token)  # file.py:46
        if "/" not in token or PLACEHOLDER.search(token):
            continue
        first = token.split("/")[0]
        if first in TOP or first in SUBPACKAGES:
            out.append(token)
    return out


def exists(token: str) -> bool:
    """``token`` names a path of the repository or of the package, or an attribute of a module there."""
    for base in (ROOT, PACKAGE):
        path = base / token
        if path.exists():
            return True
        head, _, rest = token.rpartition("/")
        stem = rest.split(".")[0]
        if stem and (base / head / f"{stem}.py").is_file():
            return True
    return False


def test_every_path_the_docs_name_exists():
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            missing += [f"{doc.relative_to(ROOT)}:{number}: {t}" for t in named_paths(line) if not exists(t)]
    assert not missing, "paths named in docs that do not exist:\n" + "\n".join(missing)


def test_the_check_catches_a_missing_path():
    assert named_paths("see `tests/fakes/fake_llm.py` and `search/embedding.py`, `app/steps.make_roles`") == [
        "tests/fakes/fake_llm.py",
        "search/embedding.py",
        "app/steps.make_roles",
    ]
    assert not exists("tests/fakes/fake_llm.py") and not exists("search/embedding.py")
    assert exists("app/steps.make_roles") and exists("judge_runner/cli/label.py") and exists("docs/")
