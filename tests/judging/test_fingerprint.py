"""judge_runner.judging.fingerprint: sampling settings, the fingerprint, comparability keys, circularity."""

from __future__ import annotations

import json

import pytest

from judge_runner.judging.fence import RENDER_VERSION
from judge_runner.judging.fingerprint import (
    DEFAULT_SEED,
    build_fingerprint,
    comparability_key,
    judge_is_generator,
    legacy_key,
    sampling_settings,
)


def test_sampling_is_pinned_where_the_api_accepts_it():
    assert sampling_settings("openai") == {"temperature": 0, "seed": DEFAULT_SEED}
    assert sampling_settings("openai", trial=2, base_seed=10) == {"temperature": 0, "seed": 12}
    assert sampling_settings("anthropic", trial=3) == {}  # anthropic 2.x takes no temperature: nothing sent
    assert sampling_settings("offline") == {}
    assert sampling_settings("some-new-provider") == {"temperature": 0}
    with pytest.raises(ValueError):
        sampling_settings("openai", trial=-1)


def test_fingerprint_records_everything_and_serialises():
    fp = build_fingerprint("openai", "gpt-x", "batched", trials=3, base_seed=5)
    data = fp.as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["mode"] == "batched" and data["trials"] == 3 and data["renderVersion"] == RENDER_VERSION
    assert data["sampling"] == {"temperature": 0, "seed": 5, "baseSeed": 5}
    assert "judge_labels_user.md" in data["promptSha256"] and "judge_labels.schema.json" in data["schemaSha256"]
    assert data["returnedModels"] == []
    with pytest.raises(ValueError):
        build_fingerprint("openai", "gpt-x", trials=0)
    with pytest.raises(ValueError):
        build_fingerprint("openai", "gpt-x", mode="listwise")


def test_comparability_key_changes_with_what_changes_judgments():
    base = build_fingerprint("openai", "gpt-x").as_dict()
    key = comparability_key(base, ["gpt-x-2026-01"])
    assert key == comparability_key(base, ["gpt-x-2026-01", "gpt-x-2026-01"])
    assert key == comparability_key({**base, "trials": 5}, ["gpt-x-2026-01"])  # trials do not change a label's meaning
    changed = [
        comparability_key(base, ["gpt-x-2026-02"]),  # the alias moved to another model
        comparability_key({**base, "mode": "batched"}, ["gpt-x-2026-01"]),
        comparability_key({**base, "renderVersion": "fence-2"}, ["gpt-x-2026-01"]),
        comparability_key({**base, "sampling": {"temperature": 0.7}}, ["gpt-x-2026-01"]),
        comparability_key({**base, "promptSha256": {**base["promptSha256"], "judge_label_system.md": "0" * 64}}, ["gpt-x-2026-01"]),
        comparability_key({**base, "schemaSha256": {}}, ["gpt-x-2026-01"]),
        comparability_key({**base, "requestedModel": "gpt-y"}, ["gpt-x-2026-01"]),
    ]
    assert key not in changed and len(set(changed)) == len(changed)


def test_version_1_runs_never_match_version_2():
    v1 = {"provider": "openai", "judgeModel": "gpt-x", "promptSha256": {"judge_system.md": "a", "judge_user.md": "b"}}
    assert legacy_key(v1) == legacy_key(dict(v1)) and legacy_key(v1).startswith("v1:")
    assert legacy_key(v1) != legacy_key({**v1, "judgeModel": "gpt-y"})
    assert legacy_key(v1) != comparability_key(build_fingerprint("openai", "gpt-x").as_dict())


def test_judge_is_generator():
    assert judge_is_generator("openai", "GPT-X", "openai", "gpt-x")
    assert not judge_is_generator("openai", "gpt-x", "anthropic", "gpt-x")
    assert not judge_is_generator("openai", "gpt-x", "openai", "gpt-y")
    assert not judge_is_generator(None, None, "openai", "gpt-x")
