"""The example GitHub Actions workflow (docs/examples/search-quality.yml) run here: its ``run:`` steps in
order, in a shell, as a runner would run them (``bash -eo pipefail``, the workflow's and the step's ``env``,
``if:`` conditions), with the offline judge. A push to main, then a pull request that changes nothing the
search returns: the second run makes no judge call and its summary says "no change"."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "examples" / "search-quality.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# the ${{ }} expressions this test controls (any other one fails the test: it would go unchecked)
VALUES = {
    "vars.JUDGE_RUNNER_PROVIDER || 'anthropic'": "offline",
    "secrets.ANTHROPIC_API_KEY": "",
    "github.token": "",
    "github.event.pull_request.number": "7",
}
USES = {"actions/checkout@v4", "actions/setup-python@v5", "actions/cache@v4"}  # stood in for: see run_workflow

pytestmark = pytest.mark.hash_embedder


def conditions(event: str) -> dict[str, bool]:
    """The ``if:`` conditions of the workflow, evaluated for ``event`` (a push to main, or a pull request)."""
    return {
        "always()": True,
        "github.event_name == 'pull_request'": event == "pull_request",
        "github.ref == 'refs/heads/main'": event == "push",
    }


def substitute(text: str) -> str:
    def value(match: re.Match[str]) -> str:
        assert match.group(1) in VALUES, f"the workflow uses an expression the test does not control: {match.group(0)}"
        return VALUES[match.group(1)]

    return EXPRESSION.sub(value, str(text))


def fake_gh(folder: Path) -> Path:
    """A ``gh`` that records each call's arguments and the body file it was given (in ``folder``/gh.log)."""
    script = folder / "gh"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, pathlib\n"
        "args = sys.argv[1:]\n"
        "body = pathlib.Path(args[args.index('--body-file') + 1]).read_text() if '--body-file' in args else None\n"
        f"with open({str(folder / 'gh.log')!r}, 'a') as log:\n"
        "    log.write(json.dumps({'args': args, 'body': body}) + '\\n')\n"
        "sys.exit(1 if '--edit-last' in args else 0)\n"  # no comment to edit yet: the step falls back to a new one
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def run_workflow(repo: Path, event: str, tools: Path, step_summary: Path) -> list[tuple[str, int]]:
    """Run the workflow's ``run:`` steps in ``repo`` for ``event``; returns each step run, by name, with its
    exit status (after a failed step only ``if: always()`` steps run, as on a runner).

    The ``uses:`` steps are stood in for: ``repo`` is the checkout, this interpreter's environment is the
    Python (``install`` is skipped: judge-runner is installed here), and ``repo`` keeps ``.judge-runner/`` and
    the run files from one run to the next, as the cache restores them."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    [job] = workflow["jobs"].values()
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    base |= {
        "PATH": os.pathsep.join([str(tools), str(Path(sys.executable).parent), base.get("PATH", "")]),
        "GITHUB_STEP_SUMMARY": str(step_summary),
        "GITHUB_EVENT_NAME": event,
        "JUDGE_RUNNER_EMBEDDER": "hash",  # the test environment's embedder (no model download)
    }
    base |= {name: substitute(value) for name, value in (workflow.get("env") or {}).items()}
    ran, failed = [], False
    for step in job["steps"]:
        if "uses" in step:
            assert step["uses"] in USES, step["uses"]
            continue
        if step.get("id") == "install":
            continue
        condition = step.get("if")
        if condition is not None:
            assert condition in conditions(event), f"an if: the test does not evaluate: {condition}"
        if (failed and condition != "always()") or (condition is not None and not conditions(event)[condition]):
            continue
        env = base | {name: substitute(value) for name, value in (step.get("env") or {}).items()}
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", substitute(step["run"])], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        failed = failed or done.returncode != 0
        ran.append((step.get("name") or step.get("id") or step["run"], done.returncode))
        STDERR.append(done.stderr)
    return ran


STDERR: list[str] = []


def passed(ran: list[tuple[str, int]]) -> list[str]:
    """The names of the steps run, each checked to have passed."""
    assert all(code == 0 for _, code in ran), (ran, STDERR[-3:])
    return [name for name, _ in ran]


def only_new_run(results: Path, seen: set[Path]) -> list[dict]:
    [path] = sorted(set(results.glob("*.jsonl")) - seen)
    seen.add(path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_example_workflow_runs_and_a_pull_request_that_changes_nothing_costs_no_judge_call(fixtures_root, query_set, tmp_path):
    repo, tools = tmp_path / "repo", fake_gh(tmp_path)
    shutil.copytree(fixtures_root, repo / "docs")
    (repo / "search-quality").mkdir()
    shutil.copy(query_set, repo / "search-quality" / "queries.json")
    results, seen = repo / "quality-results", set()

    main_summary = tmp_path / "main-summary.md"
    ran = passed(run_workflow(repo, "push", tools, main_summary))
    assert ran == [
        "Index the knowledge base (incremental)",
        "Judge the search on the pinned queries",
        "Summary",
        "Fail on a regression",
        "Pin main's run as the baseline pull requests are compared with",
    ]
    first = only_new_run(results, seen)
    assert first[-1]["labelsJudged"] > 0 and "First run" in main_summary.read_text()
    assert json.loads((results / "baseline.json").read_text())["runId"] == first[0]["runId"]

    pr_summary = tmp_path / "pr-summary.md"
    ran = passed(run_workflow(repo, "pull_request", tools, pr_summary))
    assert "Comment on the pull request" in ran and "Pin main's run as the baseline pull requests are compared with" not in ran
    second = only_new_run(results, seen)
    summary = second[-1]
    # nothing changed in what the search returns: every label and list verdict came from the judgment cache
    assert summary["labelsJudged"] == 0 and summary["judgedQueries"] == 0 and summary["labelsCached"] == first[-1]["labelsJudged"]
    assert all(line["listCached"] is not False for line in second if line["type"] == "evaluation")
    text = pr_summary.read_text()
    assert f"against the baseline `{first[0]['runId']}`" in text
    assert "**No change**: the search returned the same results" in text and "0 judge calls" in text
    [comment, fallback] = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    assert comment["args"][:3] == ["pr", "comment", "7"] and "--edit-last" in comment["args"]
    assert fallback["body"] == text  # the comment is the step summary
    assert json.loads((results / "baseline.json").read_text())["runId"] == first[0]["runId"]  # a pull request pins nothing


def test_the_example_workflow_fails_a_pull_request_that_makes_the_search_worse(fixtures_root, query_set, tmp_path):
    repo, tools = tmp_path / "repo", fake_gh(tmp_path)
    shutil.copytree(fixtures_root, repo / "docs")
    (repo / "search-quality").mkdir()
    shutil.copy(query_set, repo / "search-quality" / "queries.json")
    passed(run_workflow(repo, "push", tools, tmp_path / "main.md"))
    # the pull request: vector search alone (the test's hashing embedder ranks poorly)
    (repo / "judge-runner.toml").write_text('search_mode = "vector"\n', encoding="utf-8")
    ran = dict(run_workflow(repo, "pull_request", tools, tmp_path / "pr.md"))
    assert ran["Fail on a regression"] == 1 and ran["Summary"] == 0
    assert "Pin main's run as the baseline pull requests are compared with" not in ran
    text = (tmp_path / "pr.md").read_text()
    assert "**Regression**: nDCG@10" in text and "Gated by `trend --fail-on-regression`" in text and "No change" not in text


def test_the_install_step_installs_judge_runner_from_its_pinned_checkout_under_its_constraints(tmp_path):
    # judge-runner is not on PyPI: `pip install judge-runner` would fail, or install a stranger's package
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    [job] = workflow["jobs"].values()
    [source] = [s for s in job["steps"] if s.get("uses") == "actions/checkout@v4" and "repository" in s.get("with", {})]
    assert source["with"]["ref"] == "${{ env.JUDGE_RUNNER_REF }}" and workflow["env"]["JUDGE_RUNNER_REF"], source
    repo, tools = tmp_path / "repo", tmp_path / "tools"
    tools.mkdir()
    repo.mkdir()
    (repo / source["with"]["path"]).symlink_to(ROOT)  # stands in for the checkout at the pinned commit
    pip = tools / "pip"
    pip.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(tmp_path / 'pip.log')!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    pip.chmod(pip.stat().st_mode | stat.S_IEXEC)
    [install] = [s for s in job["steps"] if s.get("id") == "install"]
    env = {"PATH": os.pathsep.join([str(tools), os.environ["PATH"]]), **workflow["env"]}
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", install["run"]], cwd=repo, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in (tmp_path / "pip.log").read_text().splitlines()]
    torch = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch=="))
    assert calls[0] == ["install", torch, "--index-url", "https://download.pytorch.org/whl/cpu"], calls  # the CPU build
    [args] = [c for c in calls if "-c" in c]
    assert (repo / args[args.index("-c") + 1]).resolve() == ROOT / "constraints.txt"
    [target] = [a for a in args[1:] if not a.startswith("-") and a != args[args.index("-c") + 1]]
    assert (repo / target).resolve() == ROOT and 'name = "judge-runner"' in (ROOT / "pyproject.toml").read_text()
    names = {re.split(r"[=<>~!@\[ ]", a)[0] for c in calls for a in c}
    assert "judge-runner" not in names, calls  # never a package of that name from an index
