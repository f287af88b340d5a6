"""judge_runner.judging.cache: keys, get/put, stats, prune, bad files, two processes at once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from judge_runner.config import cache_path_for
from judge_runner.judging.cache import CACHE_VERSION, CachedJudgment, CacheError, JudgmentCache, JudgmentKey, batch_context

ROOT = Path(__file__).resolve().parents[2]


def key(**changes) -> JudgmentKey:
    base = JudgmentKey(
        query="rotate the backup keys",
        intent="steps to rotate",
        shown="source: a.md\nanchor: -\ntext:\nbody",
        provider="openai",
        model="gpt-x",
        prompt_sha256={"judge_label_system.md": "aa", "judge_label_user.md": "bb"},
        schema_sha256={"judge_label.schema.json": "cc"},
        render_version="fence-1",
        sampling={"temperature": 0, "seed": 7},
        mode="pointwise",
        trial=0,
    )
    return replace(base, **changes)


def test_key_is_stable_and_changes_with_every_field():
    k = key()
    assert k.digest() == key().digest() and len(k.digest()) == 64
    variants = [
        key(query="rotate the backup key"),
        key(intent="other"),
        key(shown=k.shown + " "),
        key(provider="anthropic"),
        key(model="gpt-y"),
        key(prompt_sha256={"judge_label_system.md": "ab", "judge_label_user.md": "bb"}),
        key(schema_sha256={"judge_label.schema.json": "cd"}),
        key(render_version="fence-2"),
        key(sampling={"temperature": 0, "seed": 8}),
        key(sampling={"temperature": 0}),
        key(mode="batched"),
        key(trial=1),
        key(context="x"),
    ]
    digests = {v.digest() for v in variants}
    assert len(digests) == len(variants) and k.digest() not in digests


def test_key_normalises_query_and_intent_to_nfc_but_not_the_shown_text():
    composed, decomposed = "caf\u00e9 backups", "cafe\u0301 backups"
    assert key(query=composed).digest() == key(query=decomposed).digest()
    assert key(intent=composed).digest() == key(intent=decomposed).digest()
    assert key(shown=composed).digest() != key(shown=decomposed).digest()


def test_key_is_independent_of_dict_order():
    a = key(sampling={"temperature": 0, "seed": 7})
    b = key(sampling={"seed": 7, "temperature": 0})
    assert a.digest() == b.digest()


@pytest.mark.parametrize("bad", [{"mode": "listwise"}, {"trial": -1}])
def test_key_refuses_bad_mode_and_trial(bad):
    with pytest.raises(ValueError):
        key(**bad).digest()


def test_batch_context_depends_on_order_and_boundaries():
    assert batch_context(["a", "b"]) != batch_context(["b", "a"])
    assert batch_context(["ab", "c"]) != batch_context(["a", "bc"])


def test_put_get_roundtrip_and_first_writer_wins(tmp_path):
    path = tmp_path / "sub" / "judgments.sqlite"
    with JudgmentCache(path) as cache:
        assert path.exists()
        assert cache.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        j = CachedJudgment(
            label=2,
            reason="shows the steps",
            injection_suspected=True,
            model_returned="gpt-x-2026",
            usage={"inputTokens": 812, "outputTokens": 41},
            cost_usd=None,
            latency_s=1.25,
        )
        k = key().digest()
        assert cache.get(k) is None
        assert cache.put(k, j, "pointwise") is True
        got = cache.get(k)
        assert (got.label, got.reason, got.injection_suspected, got.model_returned, dict(got.usage), got.cost_usd, got.latency_s) == (
            2,
            "shows the steps",
            True,
            "gpt-x-2026",
            {"inputTokens": 812, "outputTokens": 41},
            None,
            1.25,
        )
        assert got.created_at == pytest.approx(time.time(), abs=60)
        assert cache.put(k, replace(j, label=0), "pointwise") is False
        assert cache.get(k).label == 2
    with JudgmentCache(path) as again:  # persisted
        assert again.get(k).label == 2


def test_list_level_verdict_is_stored_as_payload(tmp_path):
    verdict = {
        "scores": {"coverage": 0.5, "snippetQuality": 0.75},
        "suggestions": ["Chunk documents at heading boundaries"],
        "note": "ünïcode",
    }
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        k = key(mode="list").digest()
        cache.put(k, CachedJudgment(label=None, payload=verdict, cost_usd=0.0012), "list")
        assert cache.get(k).payload == verdict and cache.get(k).label is None


def test_get_many_and_put_many(tmp_path):
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        items = [(key(trial=t).digest(), CachedJudgment(label=t % 4), "pointwise") for t in range(1200)]
        assert cache.put_many(items) == 1200
        assert cache.put_many(items[:10]) == 0
        wanted = [k for k, _, _ in items[::3]] + ["0" * 64]
        found = cache.get_many(wanted)
        assert len(found) == 400 and "0" * 64 not in found
        assert all(found[k].label == t % 4 for t, (k, _, _) in enumerate(items) if k in found)


@pytest.mark.parametrize(
    "bad",
    [
        CachedJudgment(label=4),
        CachedJudgment(label=True),
        CachedJudgment(label=1, usage={"x": float("nan")}),
        CachedJudgment(label=1, payload={"x": object()}),
    ],
)
def test_bad_values_are_refused_and_nothing_is_written(tmp_path, bad):
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        with pytest.raises(ValueError):
            cache.put_many([(key(trial=1).digest(), CachedJudgment(label=1), "pointwise"), (key().digest(), bad, "pointwise")])
        assert cache.stats()["judgments"] == 0
        with pytest.raises(ValueError):
            cache.put(key().digest(), CachedJudgment(label=1), "listwise")


def test_stats_and_prune(tmp_path):
    now = time.time()
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        cache.put(
            key(trial=0).digest(),
            CachedJudgment(label=3, usage={"inputTokens": 100, "outputTokens": 10}, cost_usd=0.5, created_at=now - 40 * 86400),
            "pointwise",
        )
        cache.put(
            key(trial=1).digest(),
            CachedJudgment(label=0, injection_suspected=True, usage={"inputTokens": 50}, cost_usd=None, created_at=now - 1 * 86400),
            "pointwise",
        )
        cache.put(key(trial=2, mode="list").digest(), CachedJudgment(label=None, payload={}, cost_usd=0.25, created_at=now), "list")
        cache.conn.execute(
            "INSERT INTO judgments (key, cache_version, mode, created_at) VALUES ('old', ?, 'pointwise', ?)", (CACHE_VERSION - 1, now)
        )
        stats = cache.stats()
        assert stats["judgments"] == 4 and stats["byMode"] == {"pointwise": 3, "list": 1}
        assert stats["labels"] == {"0": 1, "1": 0, "2": 0, "3": 1}
        assert stats["costUsd"] == 0.75 and stats["unknownCost"] == 2
        assert (stats["inputTokens"], stats["outputTokens"], stats["injectionSuspected"]) == (150, 10, 1)
        assert stats["otherVersions"] == 1 and stats["bytes"] > 0
        assert stats["oldest"] == pytest.approx(now - 40 * 86400)
        assert cache.prune(timedelta(days=30), other_versions=False) == 1
        assert cache.prune(None) == 1  # the other-version entry
        assert cache.prune(0.0, now=now - 3600) == 1  # only the day-old one is older than an hour before now
        assert cache.stats()["judgments"] == 1
        with pytest.raises(ValueError):
            cache.prune(-1)


def test_human_qrels_storage(tmp_path):
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        assert cache.replace_human_qrels("scifact", [("q1", "a.md", 2), ("q1", "b.md", 0)]) == 2
        assert cache.replace_human_qrels("scifact", [("q2", "c.md", 1)]) == 1  # a re-import replaces
        cache.replace_human_qrels("other", [("q1", "a.md", 3)])
        assert cache.human_qrels(["scifact"]) == [("scifact", "q2", "c.md", 1)]
        assert cache.stats()["humanQrels"] == {"scifact": 1, "other": 1}
        assert cache.prune(0.0) == 0 and len(cache.human_qrels()) == 2  # never pruned
        assert cache.delete_human_qrels("other") == 1


def test_a_file_that_is_not_a_cache_is_refused_and_left_alone(tmp_path):
    bogus = tmp_path / "judgments.sqlite"
    bogus.write_bytes(b"this is a text file, not SQLite" * 100)
    before = bogus.read_bytes()
    with pytest.raises(CacheError, match="not a judgment cache"):
        JudgmentCache(bogus)
    assert bogus.read_bytes() == before


def test_a_cache_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgmentCache(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="newer judge-runner"):
        JudgmentCache(path)


def test_an_unwritable_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CacheError, match="cannot open the judgment cache"):
        JudgmentCache(blocker / "judgments.sqlite")


def test_threads_share_one_instance(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with JudgmentCache(tmp_path / "c.sqlite") as cache:

        def work(t: int) -> bool:
            k = key(trial=t % 50).digest()
            cache.put(k, CachedJudgment(label=t % 4), "pointwise")
            return cache.get(k) is not None

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(work, range(400)))
        assert cache.stats()["judgments"] == 50


_WRITER = """
import sys, time
from judge_runner.judging.cache import CachedJudgment, JudgmentCache, JudgmentKey
path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with JudgmentCache(path) as cache:
    for i in range(n):
        # half the keys are shared with the other process, half are this process's own
        shown = f"shared {i}" if i % 2 == 0 else f"{who} {i}"
        k = JudgmentKey("q", "i", shown, "p", "m", {}, {}, "fence-1", {}, "pointwise").digest()
        cache.put(k, CachedJudgment(label=i % 4, reason=who), "pointwise")
        assert cache.get(k) is not None
        if i % 25 == 0:
            cache.stats()
print("done", who)
"""


def test_two_processes_write_concurrently(tmp_path):
    path = tmp_path / "shared.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    n = 300
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), who, str(n)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for who in ("A", "B")
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert out.startswith("done")
    with JudgmentCache(path) as cache:
        stats = cache.stats()
        assert stats["judgments"] == n // 2 + 2 * (n // 2)  # shared keys once, each process's own keys
        assert cache.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        reasons = {r for (r,) in cache.conn.execute("SELECT DISTINCT reason FROM judgments")}
        assert reasons == {"A", "B"}


def test_cache_lives_beside_the_index():
    assert cache_path_for("/data/kb/index.sqlite") == Path("/data/kb/judgments.sqlite")
    assert cache_path_for(Path(".judge-runner/index.sqlite")) == Path(".judge-runner/judgments.sqlite")
    assert cache_path_for(None) == Path(".judge-runner/judgments.sqlite")
