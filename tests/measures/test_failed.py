"""The one rule for failed queries in a difference: counted at 0 (the figure shown) and at the other side's
value (paired) or left out (unpaired); a verdict word only when both give it, else "cannot tell: B failed 5
of 14 queries (3 on-topic)"; a failed off-topic query does not move a metric."""

from __future__ import annotations

import pytest

from judge_runner.measures.failed import AT_OTHER, AT_ZERO, LEFT_OUT, Failed, Failures, failed_by_system, failed_of
from judge_runner.measures.paired import compare_values
from judge_runner.measures.ppi_compare import Arm, corrected_difference, corrected_ranking

ANSWERED = [f"q{i:02d}" for i in range(9)]  # both systems answered these on-topic queries
FAILED_ON_TOPIC = ["q09", "q10", "q11"]  # B failed these; A scored them
OFF_TOPIC = ["q12", "q13"]  # B failed these too; no metric on either side


def issue_values() -> tuple[dict[str, float], dict[str, float], Failed, Failed]:
    """nDCG@10 of A (every on-topic query) and B (the ones it answered), B better on each of those, A perfect
    where B failed: answered alone, B is an improvement; with its failures at 0 it is not."""
    gains = [0.64, 0.11, 0.08, 0.16, 0.05, 0.04, 0.03, 0.03, 0.02]
    a = {q: 0.9 - g for q, g in zip(ANSWERED, gains)} | {q: 1.0 for q in FAILED_ON_TOPIC}
    b = {q: 0.9 for q in ANSWERED}
    failed_b = Failed("B", {**{q: True for q in FAILED_ON_TOPIC}, **{q: False for q in OFF_TOPIC}}, of=14)
    return a, b, Failed("A", {}, of=14), failed_b


def test_dropping_the_failed_queries_calls_it_an_improvement_the_rule_cannot_tell():
    a, b, failed_a, failed_b = issue_values()
    dropped = compare_values(a, b, "nDCG@10", paired=True)
    assert dropped.verdict == "improvement" and dropped.n == 9  # what a comparison said before
    fair = compare_values(a, b, "nDCG@10", paired=True, failed=(failed_a, failed_b))
    assert fair.verdict == "cannot tell" and fair.n == 12
    assert fair.delta == pytest.approx(sum(b.get(q, 0.0) - a[q] for q in a) / 12, abs=1e-6)  # failed at 0, as trec_eval -c
    block = fair.failed
    assert block["system"] == {"name": "B", "failed": 5, "onTopic": 3, "of": 14, "counted": 3}
    assert block["against"] == {"name": "A", "failed": 0, "onTopic": 0, "of": 14, "counted": 0}
    assert block["shownVerdict"] != "improvement" and block["secondFigure"]["verdict"] == "improvement"
    assert block["secondFigure"]["delta"] == pytest.approx(dropped.delta * 9 / 12, abs=1e-6)  # the failed at A's value: 0 each
    assert block["holds"] is False and block["text"] == "cannot tell: B failed 5 of 14 queries (3 on-topic)"


def test_a_verdict_the_failures_cannot_change_is_given_and_says_why():
    a, _, failed_a, failed_b = issue_values()
    b = {q: 1.0 for q in ANSWERED}
    a = {q: 0.2 for q in a}  # B far better: even its failures at 0 leave it better
    result = compare_values(a, b, "nDCG@10", paired=True, failed=(failed_a, failed_b))
    assert result.verdict == "improvement" and result.failed["holds"] is True
    assert result.failed["text"] == "B failed 5 of 14 queries (3 on-topic); the verdict holds with them at 0 and the other side's value"
    plain = compare_values(a, b, "nDCG@10", paired=True, failed=(failed_a, Failed("B", of=14)))
    assert plain.failed is None and plain.n == 9  # nobody failed: nothing to say


def test_a_failed_off_topic_query_does_not_move_a_metric_and_the_text_says_so():
    a = {q: 0.5 for q in ANSWERED}
    b = {q: 0.6 for q in ANSWERED}
    failed_b = Failed("B", {q: False for q in OFF_TOPIC}, of=11)
    result = compare_values(a, b, "nDCG@10", paired=True, failed=(Failed("A", of=11), failed_b))
    assert result.verdict == "improvement" and result.n == 9 and result.failed["system"]["counted"] == 0
    assert result.failed["text"] == "B failed 2 of 11 queries (0 on-topic): off-topic queries have no nDCG@10, so they do not move it"
    assert result.failed["secondFigure"] is None


def test_unpaired_runs_count_failed_queries_at_0_and_left_out():
    old = {f"o{i}": 0.5 for i in range(10)}
    new = {f"n{i}": 0.6 for i in range(10)}
    failed_new = Failed("this run", {"x1": True, "x2": None, "x3": False}, of=13)
    rule = Failures.of(old, new, Failed("old", of=10), failed_new, paired=False, column="nDCG@10")
    assert rule.counted_system == ("x1", "x2")  # not known off-topic: it may have had an nDCG@10
    zero, left = rule.fill(old, new, AT_ZERO), rule.fill(old, new, LEFT_OUT)
    assert sorted(zero[1].values()).count(0.0) == 2 and left == (old, new)
    on_score = Failures.of(old, new, Failed("old", of=10), failed_new, paired=False, column="overall")
    assert len(on_score.counted_system) == 3  # every query has scores
    result = compare_values(old, new, "nDCG@10", paired=False, failed=(Failed("old", of=10), failed_new))
    assert result.failed["second"] == LEFT_OUT and result.failed["system"]["counted"] == 2


def test_paired_fill_puts_a_failed_query_where_the_other_side_has_a_value_only():
    rule = Failures.of(
        {"q1": 0.4, "q2": 0.7}, {"q1": 0.5}, Failed("A"), Failed("B", {"q2": True, "q3": True}, 3), paired=True, column="R@10"
    )
    assert rule.counted_system == ("q2",)
    assert rule.fill({"q1": 0.4, "q2": 0.7}, {"q1": 0.5}, AT_OTHER)[1] == {"q1": 0.5, "q2": 0.7}
    assert rule.fill({"q1": 0.4}, {"q1": 0.5}, AT_ZERO)[1] == {"q1": 0.5}  # a subset (the labelled queries): q2 not in it


def test_a_failed_querys_type_comes_from_its_line_else_from_another_systems_line():
    lines = [{"system": "a", "queryId": "q1", "queryType": "keyword"}, {"system": "a", "queryId": "q2", "queryType": "off-topic"}]
    errors = [
        {"system": "b", "queryId": "q1"},
        {"system": "b", "queryId": "q2"},
        {"system": "b", "queryId": "q3", "queryType": "conceptual"},
    ]
    found = failed_by_system(lines, errors, ["a", "b"])
    assert found["b"].queries == {"q1": True, "q2": False, "q3": True} and found["b"].of == 3
    assert found["a"] == Failed("a", {}, 2)
    assert failed_of("x", [{"queryId": "q9"}], 4).words() == "x failed 1 of 5 queries (0 on-topic, 1 of unrecorded type)"


def test_a_corrected_difference_is_cannot_tell_when_the_failures_could_turn_it():
    gains = [0.64, 0.11, 0.08, 0.16, 0.05, 0.04, 0.03, 0.03, 0.02] * 2
    answered = [f"q{i:02d}" for i in range(18)]
    a = {q: 0.9 - g for q, g in zip(answered, gains)} | {f"f{i}": 1.0 for i in range(6)}
    b = {q: 0.9 for q in answered}
    failed_a, failed_b = Failed("A", of=24), Failed("B", {f"f{i}": True for i in range(6)}, of=24)
    human_a, human_b = dict(a), dict(b)  # every query labelled: people agree with the judge
    plain = corrected_difference(Arm("A", a, human_a), Arm("B", b, human_b))
    assert plain is not None and plain.outcome == "better"  # over the answered queries only
    fair = corrected_difference(Arm("A", a, human_a), Arm("B", b, human_b), failed=(failed_a, failed_b))
    assert fair is not None and fair.outcome == "cannot tell" and fair.decision is None
    assert fair.verdict == "cannot tell: B failed 6 of 24 queries (6 on-topic)"
    assert fair.as_dict()["failed"]["secondFigure"]["outcome"] == "better"
    assert fair.found.queries == 24  # the figure shown counts B's failed queries at 0
    ranking = corrected_ranking({"A": a, "B": b}, {"A": human_a, "B": human_b}, failed={"A": failed_a, "B": failed_b})
    assert ranking is not None and [s.rank_set for s in ranking.systems] == [(1, 2), (1, 2)]  # not ordered by a guess
    assert ranking.pairs[0].outcome == "cannot tell"
