"""The example of docs/python-api.md runs as written, and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"

pytestmark = pytest.mark.hash_embedder


def test_the_documented_example_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
    monkeypatch.chdir(tmp_path)  # as from the repository's root: fixtures/ here, what it writes goes here
    exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\d+ queries written, \d+ dropped", printed[0])
    assert re.match(r"ok 0 overall 0\.\d{3} nDCG@10 [01]\.\d{3} quality-results/\S+\.jsonl", printed[1])
    assert len(list((tmp_path / "quality-results").glob("*.jsonl"))) == 1 and (tmp_path / "queries.json").is_file()
    assert any(line.startswith("latest: ") and line.endswith("regressed: False") for line in printed)
    assert "## Search quality" in printed and any("Python function" in line for line in printed)
