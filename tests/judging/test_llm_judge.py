"""judge_runner.judging.llm_judge: the overall score and JSON reply recovery. (The single-call verdict and its
results rendering were retired by the label-first protocol: validation of its replies is
tests/judging/test_requests.py's, what the judge is shown tests/judging/test_fence.py's.)"""

from __future__ import annotations

import pytest

from judge_runner.judging.llm_judge import parse_json_reply
from judge_runner.judging.scores import overall_score

# -- overall_score --------------------------------------------------------------------------------

SCORES = {"relevance": 0.9, "ranking": 0.5, "coverage": 0.4, "snippetQuality": 0.2, "overall": 0.0}


def test_overall_equal_weights_is_the_mean_of_four_dimensions():
    assert overall_score(SCORES) == pytest.approx((0.9 + 0.5 + 0.4 + 0.2) / 4)
    # the judge's own "overall" figure is ignored
    assert overall_score({**SCORES, "overall": 1.0}) == overall_score(SCORES)


def test_overall_custom_weights():
    weights = {"relevance": 3.0, "ranking": 1.0, "coverage": 0.0, "snippetQuality": 0.0}
    assert overall_score(SCORES, weights) == pytest.approx((3 * 0.9 + 0.5) / 4)
    # a missing dimension weighs 0
    assert overall_score(SCORES, {"relevance": 1.0}) == pytest.approx(0.9)


@pytest.mark.parametrize(
    "weights",
    [
        {"relevance": 0.0, "ranking": 0.0, "coverage": 0.0, "snippetQuality": 0.0},
        {"relevance": 1.0, "ranking": -1.0, "coverage": 0.0, "snippetQuality": 0.0},
        {"unknown": 1.0},
    ],
)
def test_overall_bad_weights_raise(weights):
    with pytest.raises(ValueError):
        overall_score(SCORES, weights)


# -- parse_json_reply -----------------------------------------------------------------------------


def test_parse_plain_json():
    assert parse_json_reply('{"a": 1}') == ({"a": 1}, [])
    assert parse_json_reply('  \n{"a": [1, 2]}\n ') == ({"a": [1, 2]}, [])


@pytest.mark.parametrize("text", ['```json\n{"a": 1}\n```', '```\n{"a": 1}\n```', '  ```json\n{\n  "a": 1\n}\n```  '])
def test_parse_one_outer_fence_is_recovered_and_recorded(text):
    assert parse_json_reply(text) == ({"a": 1}, ["stripped code fence"])


def test_parse_prose_around_one_object_is_recovered_and_recorded():
    data, recoveries = parse_json_reply('Here is my verdict:\n{"a": {"b": 2}}\nHope this helps!')
    assert data == {"a": {"b": 2}}
    assert recoveries == ["removed prose around the JSON object"]


@pytest.mark.parametrize(
    "text",
    [
        "{not json}",
        '```json\n{"a": 1,}\n```',
        'first {"a": 1} then {"b": 2}',
        '{"a": 1',
    ],
)
def test_parse_invalid_json_raises(text):
    with pytest.raises(ValueError):
        parse_json_reply(text)


@pytest.mark.parametrize("text", ["", "   ", "no object here", "} backwards {"])
def test_parse_no_object_raises(text):
    with pytest.raises(ValueError) as info:
        parse_json_reply(text)
    assert "no JSON object" in str(info.value)
