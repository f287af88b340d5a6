"""prompts/ and schemas/ are found from the checkout (editable install) and from a built wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_resources_from_checkout():
    from judge_runner.core.resources import load_prompt, load_schema, resource_dir

    assert resource_dir("prompts") == ROOT / "prompts"
    assert "record_label" in load_prompt("judge_label_user.md")
    assert load_schema("judge_label.schema.json")["title"] == "JudgeLabel"


def test_wheel_ships_prompts_schemas_and_pricing(tmp_path):
    pytest.importorskip("hatchling")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    wheel = next(tmp_path.glob("judge_runner-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for prompt in (
        "generate_system.md",
        "generate_user.md",
        "judge_label_system.md",
        "judge_label_user.md",
        "judge_labels_user.md",
        "judge_list_system.md",
        "judge_list_user.md",
    ):
        assert f"judge_runner/_data/prompts/{prompt}" in names
    for schema in ("query_set", "judge_label", "judge_labels", "judge_list_verdict", "run_start", "evaluation", "error", "summary"):
        assert f"judge_runner/_data/schemas/{schema}.schema.json" in names
    assert "judge_runner/llm/pricing.json" in names

    # the unpacked wheel, first on sys.path and run from elsewhere, loads its own copies
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = (
        "import judge_runner.core.resources as r, judge_runner.llm.pricing as p;"
        "print(r.resource_dir('prompts')); print(len(r.load_prompt('judge_label_system.md')) > 1000);"
        "print(r.load_schema('summary.schema.json')['title']); print(p.price_for('claude-sonnet-4-6') is not None)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert Path(lines[0]).is_relative_to(site)
    assert lines[1:] == ["True", "SummaryLine", "True"]
