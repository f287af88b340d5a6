"""``schemas/label_journal.schema.json`` holds every line of real label journals: plain sessions of whole queries
and of pairs, budget sessions of a mean, a difference (with grades known from another set), single pairs and a
ranking, with labels, skips and undos; and refuses a plan line that is not one."""

from __future__ import annotations

import json

import jsonschema
import pytest

from judge_runner.core.resources import load_schema
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import import_human_qrels
from tests.support.budget_runs import truth_grades, write_compare_run
from tests.support.label_client import Job, act, state

SCHEMA = load_schema("label_journal.schema.json")
SESSIONS = {
    "plain-queries": {"queries": 3},
    "plain-pairs": {"kind": "pairs", "per_label": 2, "queries": None},
    "mean": {"budget": 40, "queries": None},
    "difference": {"budget": 60, "question": "difference", "systems": ("hybrid", "fts"), "queries": None},
    "pairs": {"budget": 30, "kind": "pairs", "question": "difference", "systems": ("fts", "vector"), "queries": None},
    "ranking": {"budget": 150, "question": "ranking", "queries": None},
}


def _acts(job):
    truths = truth_grades(40)
    tab = "tab-schema"
    for step in range(4):
        item = state(job.url, tab)["item"]
        if step == 1:
            act(job.url, "skip", tab, item=item["id"])
        else:
            act(job.url, "label", tab, item=item["id"], grade=truths[(item["qid"], item["source"])])
    act(job.url, "undo", tab)


@pytest.mark.parametrize("session", list(SESSIONS))
def test_every_line_of_a_real_journal_holds_to_the_schema(tmp_path, session):
    run = write_compare_run(tmp_path / "runs", 40, systems=("hybrid", "fts", "vector"), human_queries=2)
    qrels = tmp_path / "other.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in truth_grades(40).items() if q in ("q5", "q6")), encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, qrels, "other")
    job = Job(tmp_path, run, name=session, sampling=SESSIONS[session])
    _acts(job)
    job.stop()
    lines = [json.loads(raw) for raw in (tmp_path / "labels" / f"{session}.journal.jsonl").read_text().splitlines()]
    assert [line["type"] for line in lines] == ["plan", "label", "skip", "label", "label", "undo"]
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in lines:
        validator.validate(line)
    budget = lines[0].get("budget")
    assert (budget is not None) == (session not in ("plain-queries", "plain-pairs"))
    if budget is not None and session != "pairs":
        assert budget["reused"] > 0 and budget["known"]  # the other set's grades, known and free


@pytest.mark.parametrize(
    "spoil",
    [
        lambda plan: plan["budget"]["probabilities"].update(q9=1.5),
        lambda plan: plan["items"][0].update(judgeLabel=2),  # the page never shows the judge's label
        lambda plan: plan["budget"].update(design="adaptive"),
        lambda plan: plan.pop("items"),
    ],
)
def test_a_plan_line_that_is_not_one_is_refused(tmp_path, spoil):
    run = write_compare_run(tmp_path / "runs", 40)
    Job(tmp_path, run, sampling={"budget": 60, "question": "difference", "queries": None}).stop()
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    jsonschema.validate(plan, SCHEMA)
    spoil(plan)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(plan, SCHEMA)
