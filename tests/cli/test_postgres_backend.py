"""The CLI on the PostgreSQL backend: index, search and the main job with --backend postgres."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.clitools import invoke, run_lines


@pytest.fixture
def pg_env(postgres_dsn):
    schema = f"cli_{uuid.uuid4().hex[:8]}"
    yield {"DATABASE_URL": postgres_dsn, "JUDGE_RUNNER_PG_SCHEMA": schema, "JUDGE_RUNNER_DSN": None}
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.hash_embedder  # the CLI on the postgres backend, not search quality: no MiniLM
def test_index_search_and_main_job_on_postgres(pg_env, tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "drain.md").write_text("# Draining a Kubernetes node\n\nCordon the node, then drain it with kubectl drain.\n")
    (kb / "backup.py").write_text('"""Backups."""\n\ndef atomic_write_json(path, data):\n    """Write JSON atomically."""\n')
    (kb / "flags.json").write_text('{"search_v2": true, "retention_days": 30}')
    result = invoke(["index", str(kb), "--backend", "postgres", "--json"], pg_env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["documents"] == 3  # progress goes to stderr, also with --json
    result = invoke(["search", "atomic_write_json", "--backend", "postgres", "--json"], pg_env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["results"][0]["source"] == "backup.py"
    out = tmp_path / "r"
    result = invoke(
        ["generate-and-evaluate", "--fixtures", str(kb), "--backend", "postgres", "--count", "3", "--out-dir", str(out)], pg_env
    )
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    assert lines[0]["config"]["index"].startswith("postgresql://") and lines[-1]["evaluated"] == 3


def test_postgres_without_dsn_is_a_usage_error(tmp_path):
    result = invoke(["search", "x", "--backend", "postgres"], {"DATABASE_URL": None, "JUDGE_RUNNER_DSN": None})
    assert result.exit_code == 2 and "--dsn" in result.output


def test_unreachable_server_is_a_clear_error_without_the_password(tmp_path):
    dsn = "postgresql://judge:s3cret@127.0.0.1:1/kb?connect_timeout=2"
    result = invoke(["search", "x", "--backend", "postgres", "--dsn", dsn])
    assert result.exit_code == 2 and "cannot open the PostgreSQL index" in result.output
    assert "s3cret" not in result.output


def test_unescaped_at_in_the_password_never_leaks():
    dsn = "postgresql://judge:S3cret@Pw0rd@127.0.0.1:1/kb?connect_timeout=2"
    result = invoke(["search", "x", "--backend", "postgres", "--dsn", dsn])
    assert result.exit_code == 2
    assert "S3cret" not in result.output and "Pw0rd" not in result.output
