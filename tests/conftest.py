"""Shared fixtures for judge-runner's tests.

- Puts the repository root on ``sys.path`` so ``from tests.support.fakes.fake_llm import ...`` works (every folder of
  tests/ is a package, so test modules are imported as ``tests.<package>.test_<name>``).
- Shared helpers live in tests/support/ (no test module imports another); fixtures used in several folders are here.
- ``fixtures_root``: the sample knowledge base shipped in ``fixtures/``.
- ``hash_embedder`` (or ``@pytest.mark.hash_embedder``): the deterministic hashing embedder instead of
  MiniLM for one test, through the seam ``JUDGE_RUNNER_EMBEDDER=hash``.
- ``fixtures_index``: ONE session-scoped SQLite index of ``fixtures/`` (the embedding model loads once
  per test session; build it only in tests that really need vectors). Tests must treat it as
  read-only.
- ``hash_db``: one SQLite index of ``fixtures/`` built by ``judge-runner index`` with the hashing embedder,
  per module (copy it before writing to it).
- ``query_set``: 15 queries about ``fixtures/`` written by the loopback fake's phase one, per module.
- ``postgres_dsn``: a PostgreSQL server with pgvector for the session: ``DATABASE_URL`` when set, else a
  throwaway embedded cluster (tests/support/pgcluster.py) on a free loopback port, stopped at the end; tests that
  use it skip, saying why, when neither is available.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "fixtures"

# Under pytest-xdist (the README runs two workers), each worker is one core's worth of work: torch's default of
# one thread per core would oversubscribe the machine, and its threads then spin waiting for each other (small
# MiniLM encodes were 10-20x slower with the other worker busy). Set before anything imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def fixtures_root() -> Path:
    """The sample knowledge base (read-only)."""
    return FIXTURES


@pytest.fixture(scope="session")
def embedder():
    """The process-wide all-MiniLM-L6-v2 embedder on torch (loaded lazily on first encode), whatever
    ``JUDGE_RUNNER_EMBEDDER`` says: the session index measures real search quality, and the tests' figures
    are the reference path's (the ONNX kinds are checked against it in tests/embed/test_onnx_embedder.py)."""
    from judge_runner.embed.registry import instance

    return instance("torch")


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory):
    """The session's ONNX export cache (``JUDGE_RUNNER_CACHE_DIR``): the fp32 export, then its int8
    quantization, about 30-60 s once per worker that embeds with an ONNX kind."""
    return tmp_path_factory.mktemp("judge-runner-cache")


@pytest.fixture(scope="session", autouse=True)
def _exports_stay_in_the_session(onnx_cache):
    """No test exports into the user's own cache (``~/.cache/judge-runner``): the default embedder
    (onnx-int8) exports on first use, and every test, and every process a test starts, exports into the
    session's :func:`onnx_cache` instead."""
    from judge_runner.embed.onnx_export import CACHE_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(onnx_cache))
        yield


@pytest.fixture
def hash_embedder(monkeypatch):
    """Opt-in for tests that do not measure search quality: ``JUDGE_RUNNER_EMBEDDER=hash`` for this test,
    so every command's settings (``embedder``) choose the small deterministic
    :class:`~judge_runner.embed.hashing.HashEmbedder` for its index, search, offline judge and query review
    instead of loading MiniLM. Yields the process's hash embedder (:func:`judge_runner.embed.registry.instance`),
    to pass to what a test builds itself. Same as marking the test ``@pytest.mark.hash_embedder``."""
    from judge_runner.embed.registry import SETTING_ENV, instance

    monkeypatch.setenv(SETTING_ENV, "hash")
    yield instance("hash")


def pytest_configure(config):
    # A worker that crashes ends the run, naming the test it ran, instead of being replaced: the replacement of a
    # crashed worker gets no work under xdist's LoadScope scheduling (which MINILM_TESTS' grouping uses, below),
    # so the run waited for it forever. An explicit --max-worker-restart still wins.
    if getattr(config.option, "maxworkerrestart", "absent") is None:
        config.option.maxworkerrestart = "0"
    config.addinivalue_line(
        "markers",
        "hash_embedder: use the deterministic hashing embedder (JUDGE_RUNNER_EMBEDDER=hash) "
        "instead of MiniLM; for tests that do not measure search quality",
    )
    config.addinivalue_line(
        "markers",
        "minilm: runs the real MiniLM model without asking for the ``embedder`` fixture (e.g. through the "
        "CLI); such tests are listed in MINILM_TESTS or MINILM_ALONE (tests/conftest.py)",
    )


# The tests that run MiniLM (nodeid prefixes, relative to the repository). Under pytest-xdist they all go to ONE
# worker (see pytest_xdist_make_scheduler), so the model is imported and the session index built once...
MINILM_TESTS = (
    "tests/search/test_builtin.py::",
    "tests/search/test_passage_audit.py::",
    "tests/search/test_postgres.py::",
    "tests/search/test_beir_trec.py::test_beir_index_and_trec_run",
    "tests/judging/test_heuristic.py::",
    "tests/judging/test_protocol.py::test_injection_twin_gets_its_clean_label_on_the_offline_judge",
    "tests/search/test_query_speed.py::test_prepared_minilm_search_gives_the_unprepared_results",
    "tests/search/test_query_speed.py::test_fts_search_from_the_shell_never_imports_torch",
    "tests/search/test_query_speed.py::test_small_inputs_run_on_one_torch_thread",
    "tests/embed/test_onnx_embedder.py::",  # one worker, so the session's ONNX export (about 30-60 s) is made once
)
# ...except these, long enough (the SciFact calibration, a minute) to be worth a second model load: each runs
# on whichever worker is free, beside the group instead of after it.
MINILM_ALONE = ("tests/calibrate/test_scifact.py::",)


def pytest_collection_modifyitems(config, items):
    """Keeps :data:`MINILM_TESTS` and :data:`MINILM_ALONE` true: a test that runs MiniLM (it asks for ``embedder``,
    directly or through ``fixtures_index``, or for ``db_copy`` without the hashing embedder, or is marked
    ``minilm``) but is listed in neither is a usage error, since under xdist it would load the model on a second
    worker (seconds, and both workers' cores)."""
    stray = [item.nodeid for item in items if _runs_minilm(item) and not item.nodeid.startswith(MINILM_TESTS + MINILM_ALONE)]
    if stray:
        raise pytest.UsageError(f"tests that run MiniLM must be listed in MINILM_TESTS or MINILM_ALONE (tests/conftest.py): {stray}")


def _runs_minilm(item) -> bool:
    names = getattr(item, "fixturenames", ())
    hashed = "hash_embedder" in names or item.get_closest_marker("hash_embedder") is not None
    return "embedder" in names or item.get_closest_marker("minilm") is not None or ("db_copy" in names and not hashed)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With ``-n`` (the README runs ``-n 2``) and the default ``--dist load``: xdist's load scheduling, except
    that the tests in :data:`MINILM_TESTS` form one unit of work that runs on one worker (the largest unit,
    so it is handed out first, while the other worker takes the rest one test at a time). xdist's own
    ``--dist loadgroup`` would do this with markers but cannot rename test ids under pytest 9."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class MiniLMOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "minilm" if nodeid.startswith(MINILM_TESTS) else nodeid

    return MiniLMOnOneWorker(config, log)


@pytest.fixture(autouse=True)
def _signal_handlers_unchanged(request):
    """Fails a test that leaves the process's SIGINT or SIGTERM handler changed (and puts it back): such a
    handler outlives the test in its worker, where a later test's signal to itself then runs it (the
    command line's ends the process: a crashed xdist worker)."""
    import signal

    numbers = (signal.SIGINT, signal.SIGTERM)
    before = {number: signal.getsignal(number) for number in numbers}
    yield
    changed = {signal.Signals(n).name: signal.getsignal(n) for n in numbers if signal.getsignal(n) is not before[n]}
    for number in numbers:
        signal.signal(number, before[number])
    if changed:
        pytest.fail(f"{request.node.nodeid} left signal handlers changed: {changed}")


@pytest.fixture(autouse=True)
def _hash_embedder_marker(request):
    """Applies the ``hash_embedder`` fixture to tests marked ``@pytest.mark.hash_embedder``."""
    if request.node.get_closest_marker("hash_embedder"):
        request.getfixturevalue("hash_embedder")


@pytest.fixture(scope="session")
def fixtures_index(tmp_path_factory, embedder):
    """A SQLite index of ``fixtures/`` built once per session; yields ``(index, report)``.

    Read-only for tests: do not index into it or prune it.
    """
    from judge_runner.search.indexer import index_tree
    from judge_runner.search.sqlite import SQLiteIndex

    db = tmp_path_factory.mktemp("index") / "index.sqlite"
    index = SQLiteIndex(db, embedder=embedder)
    report = index_tree(index, FIXTURES)
    try:
        yield index, report
    finally:
        index.close()


@pytest.fixture(scope="session")
def hash_fixtures_db(tmp_path_factory) -> Path:
    """A SQLite index of ``fixtures/`` built once per session with the hashing embedder (seconds, no
    MiniLM), for tests marked ``hash_embedder``; read-only (``db_copy`` hands out copies)."""
    from judge_runner.embed.hashing import HashEmbedder
    from judge_runner.search.indexer import index_tree
    from judge_runner.search.sqlite import SQLiteIndex

    db = tmp_path_factory.mktemp("hash-index") / "index.sqlite"
    index = SQLiteIndex(db, embedder=HashEmbedder())
    try:
        index_tree(index, FIXTURES)
    finally:
        index.close()
    return db


@pytest.fixture
def db_copy(request, tmp_path) -> Path:
    """A private copy of the session's fixtures index, so a test may re-index or prune it: the MiniLM
    index, or the hashing one in a test that uses the hashing embedder (an index must match its embedder)."""
    import sqlite3

    from judge_runner.embed.registry import SETTING_ENV as EMBEDDER_ENV

    target = tmp_path / "index.sqlite"
    dst = sqlite3.connect(target)
    if os.environ.get(EMBEDDER_ENV) == "hash":
        src = sqlite3.connect(request.getfixturevalue("hash_fixtures_db"))
        src.backup(dst)
        src.close()
    else:
        index, _ = request.getfixturevalue("fixtures_index")
        index.conn.backup(dst)
    dst.close()
    return target


@pytest.fixture(scope="session")
def postgres_dsn():
    """A PostgreSQL DSN for the session (see the module docstring). Tests create their own schemas in it
    and drop them; nothing else in the database is touched."""
    for module in ("psycopg", "psycopg_pool", "pgvector"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[test]')")
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    from tests.support.pgcluster import ClusterUnavailable, start_cluster

    try:
        cluster = start_cluster()
    except ClusterUnavailable as exc:
        pytest.skip(f"no PostgreSQL for the postgres backend tests (DATABASE_URL unset and {exc})")
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def hash_db(tmp_path_factory) -> Path:
    """One SQLite index of ``fixtures/`` made by ``judge-runner index`` with the hashing embedder (per module;
    tests copy it before they write to it)."""
    from judge_runner.embed.registry import SETTING_ENV as EMBEDDER_ENV
    from tests.support.clitools import invoke

    db = tmp_path_factory.mktemp("idx") / "index.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(EMBEDDER_ENV, "hash")
        result = invoke(["index", str(FIXTURES), "--db", str(db)], {EMBEDDER_ENV: "hash"})
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def query_set(tmp_path_factory) -> Path:
    """15 queries about ``fixtures/`` written by the loopback fake's phase one through the CLI (14 on-topic, one
    off-topic; per module)."""
    import json

    from tests.support.batch_runs import env_for
    from tests.support.clitools import KEEP_ALL, invoke
    from tests.support.fakes.fake_llm import FakeLLMServer

    out = tmp_path_factory.mktemp("queries") / "queries.json"
    with FakeLLMServer() as server:
        result = invoke(
            ["generate", "--fixtures", str(FIXTURES), "--count", "15", "--out", str(out), "--provider", "anthropic"] + KEEP_ALL,
            env_for(server, "anthropic"),
        )
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["queries"]) == 15
    return out
