"""judge_runner.querygen.agent's FileSandbox, and judge_runner.querygen.submitted's check_query_set and filter_queries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judge_runner.querygen.agent import (
    GREP_CAP,
    READ_CAP_CHARS,
    FileSandbox,
    SandboxError,
)
from judge_runner.querygen.submitted import check_query_set, filter_queries


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def tree(tmp_path) -> Path:
    """tmp_path/root is the knowledge base; tmp_path/outside* lies beyond it."""
    root = tmp_path / "root"
    write(root / "README.md", "# Readme\n\nThe NEEDLE is here.\n")
    write(root / "notes.txt", "plain notes\nfoo(bar) call\n")
    write(root / "docs" / "guide.md", "# Guide\n\nline two\nanother needle line\n")
    write(root / "docs" / "deep" / "nested.md", "# Nested\n\nneedle deep down\n")
    write(root / "docs2" / "other.md", "needle in docs2\n")
    write(root / "config" / "app.yaml", "port: 8080\n")
    write(root / ".secret.md", "needle secret\n")
    write(root / ".hidden" / "x.md", "needle hidden\n")
    write(tmp_path / "outside.md", "needle outside\n")
    write(tmp_path / "outside_dir" / "leak.md", "needle leak\n")
    os.symlink(tmp_path / "outside.md", root / "link_out.md")
    os.symlink(tmp_path / "outside_dir", root / "dir_out")
    os.symlink(root / "docs" / "guide.md", root / "alias.md")  # inside: allowed
    (root / "blob.md").write_bytes(b"\x00\x01binary\x00")
    return root


@pytest.fixture()
def sandbox(tree) -> FileSandbox:
    return FileSandbox(tree)


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("..", "'..'"),
        ("../outside.md", "'..'"),
        ("docs/../../outside.md", "'..'"),
        ("docs\\..\\..\\outside.md", "'..'"),
        ("/etc/passwd", "absolute"),
        ("/", "absolute"),
        ("C:\\Windows\\win.ini", "absolute"),
        ("c:/Windows", "absolute"),
        ("D:relative", "absolute"),
        (".secret.md", "hidden"),
        (".hidden/x.md", "hidden"),
        ("docs/.hidden", "hidden"),
        ("link_out.md", "outside"),
        ("dir_out", "outside"),
        ("dir_out/leak.md", "outside"),
        ("missing.md", "no such"),
        ("docs/missing/", "no such"),
    ],
)
def test_resolve_refuses(sandbox, path, fragment):
    with pytest.raises(SandboxError) as info:
        sandbox.resolve(path)
    assert fragment in str(info.value)


@pytest.mark.parametrize("tool", ["read_file", "list_dir"])
@pytest.mark.parametrize("path", ["../outside.md", "/etc/passwd", ".secret.md", "link_out.md", "dir_out"])
def test_tools_refuse_what_resolve_refuses(sandbox, tool, path):
    with pytest.raises(SandboxError):
        getattr(sandbox, tool)(path)


def test_resolve_rejects_non_strings(sandbox):
    with pytest.raises(SandboxError):
        sandbox.resolve(None)  # type: ignore[arg-type]


def test_resolve_accepts_relative_paths(sandbox, tree):
    assert sandbox.resolve("docs/guide.md") == (tree / "docs" / "guide.md").resolve()
    assert sandbox.resolve("./docs/guide.md") == (tree / "docs" / "guide.md").resolve()
    assert sandbox.resolve("docs\\guide.md") == (tree / "docs" / "guide.md").resolve()
    assert sandbox.resolve("") == tree.resolve()
    assert sandbox.resolve(".") == tree.resolve()


# -- list_dir -------------------------------------------------------------------------------------


def test_list_dir_root(sandbox):
    entries = sandbox.list_dir(".").split("\n")
    assert entries == ["config/", "docs/", "docs2/", "README.md", "alias.md", "blob.md", "notes.txt"]


def test_list_dir_subfolder_folders_first(sandbox):
    assert sandbox.list_dir("docs").split("\n") == ["docs/deep/", "docs/guide.md"]


def test_list_dir_on_a_file_and_empty_folder(sandbox, tree):
    with pytest.raises(SandboxError):
        sandbox.list_dir("README.md")
    (tree / "empty").mkdir()
    assert sandbox.list_dir("empty") == "(empty folder)"


# -- glob -----------------------------------------------------------------------------------------


def test_glob_double_star_matches_root_and_nested(sandbox):
    matches = sandbox.glob("**/*.md").split("\n")
    assert "README.md" in matches
    assert "docs/guide.md" in matches
    assert "docs/deep/nested.md" in matches
    assert "docs2/other.md" in matches
    assert not any(m.startswith(".") or "/." in m for m in matches)
    assert not any("outside" in m or "leak" in m or m.startswith("dir_out") or m == "link_out.md" for m in matches)
    assert "notes.txt" not in matches


def test_glob_single_star_does_not_cross_folders(sandbox):
    assert set(sandbox.glob("*.md").split("\n")) == {"README.md", "alias.md", "blob.md"}
    assert sandbox.glob("docs/*.md") == "docs/guide.md"
    assert sandbox.glob("docs/**").split("\n") == ["docs/deep/nested.md", "docs/guide.md"]


def test_glob_question_mark_and_no_match(sandbox):
    assert sandbox.glob("config/app.yam?") == "config/app.yaml"
    assert sandbox.glob("**/*.rst") == "(no files match)"


@pytest.mark.parametrize("pattern", ["", "   "])
def test_glob_empty_pattern_refused(sandbox, pattern):
    with pytest.raises(SandboxError):
        sandbox.glob(pattern)


@pytest.mark.parametrize("pattern", ["../*", "../**/*.md", "/**/*.md", "docs/../../*"])
def test_glob_refuses_parent_and_absolute_patterns(sandbox, pattern):
    with pytest.raises(SandboxError, match="not allowed"):
        sandbox.glob(pattern)


# -- read_file ------------------------------------------------------------------------------------


def test_read_file_happy_path(sandbox):
    assert sandbox.read_file("docs/guide.md") == "# Guide\n\nline two\nanother needle line\n"


def test_read_file_through_inside_symlink(sandbox):
    assert sandbox.read_file("alias.md") == "# Guide\n\nline two\nanother needle line\n"


def test_read_file_truncates_with_a_note(sandbox, tree):
    text = "".join(chr(ord("a") + i % 26) for i in range(READ_CAP_CHARS + 345))
    write(tree / "long.md", text)
    out = sandbox.read_file("long.md")
    assert out.startswith(text[:READ_CAP_CHARS])
    assert text[: READ_CAP_CHARS + 1] not in out
    assert out.endswith(f"[... truncated: showing {READ_CAP_CHARS} of {READ_CAP_CHARS + 345} characters]")


def test_read_file_at_exactly_the_cap_is_not_truncated(sandbox, tree):
    text = "z" * READ_CAP_CHARS
    write(tree / "exact.md", text)
    assert sandbox.read_file("exact.md") == text


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_read_file_of_a_1_gb_log_reads_only_what_it_shows(sandbox, tree, encoding):
    # regression: read_file on a 1 GB .log read the whole file (2.0 GB of memory) to return 12,000 characters
    import tracemalloc

    line = "2026-03-01 12:00:00 INFO ingest lag 0.4 s — déjà vu ü €\n"
    head = (line * (4 * READ_CAP_CHARS // len(line) + 10)).encode(encoding)
    big = tree / "ingest.log"
    with open(big, "wb") as handle:  # sparse: 1 GB on paper, the head's bytes on disk
        handle.write(head)
        handle.truncate(1024**3)
    tracemalloc.start()
    try:
        out = sandbox.read_file("ingest.log")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024
    assert out.startswith(line * 3)
    assert out.endswith(f"[... truncated: showing {READ_CAP_CHARS} of a file of {1024**3} bytes]")
    assert len(out.split("\n[... truncated")[0]) == READ_CAP_CHARS and "\ufffd" not in out


def test_read_file_cut_inside_a_utf8_character_loses_no_character(sandbox, tree):
    from judge_runner.querygen.agent import READ_CAP_BYTES

    text = "ab" + "€" * (READ_CAP_BYTES // 3 + 50)  # 3 bytes each: the byte cap falls inside one
    write(tree / "euro.md", text)
    out = sandbox.read_file("euro.md")
    assert out.startswith("ab" + "€" * (READ_CAP_CHARS - 2)) and "\ufffd" not in out


def test_read_file_refuses_folders_and_binaries(sandbox):
    with pytest.raises(SandboxError):
        sandbox.read_file("docs")
    with pytest.raises(SandboxError) as info:
        sandbox.read_file("blob.md")
    assert "binary" in str(info.value)


# -- grep -----------------------------------------------------------------------------------------


def test_grep_is_case_insensitive_and_reports_file_and_line(sandbox):
    lines = sandbox.grep("needle").split("\n")
    assert "README.md:3: The NEEDLE is here." in lines
    assert "docs/guide.md:4: another needle line" in lines
    assert "docs/deep/nested.md:3: needle deep down" in lines
    assert "docs2/other.md:1: needle in docs2" in lines
    # hidden files and symlinks leading out are never searched
    assert not any("secret" in l or "hidden" in l or "outside" in l or "leak" in l for l in lines)


def test_grep_limited_to_a_folder_does_not_match_sibling_prefixes(sandbox):
    lines = sandbox.grep("needle", "docs").split("\n")
    assert sorted(lines) == ["docs/deep/nested.md:3: needle deep down", "docs/guide.md:4: another needle line"]


def test_grep_limited_to_one_file(sandbox):
    assert sandbox.grep("needle", "README.md") == "README.md:3: The NEEDLE is here."


def test_grep_regex_and_invalid_regex_falls_back_to_literal(sandbox):
    assert sandbox.grep(r"ne+dle\s+deep") == "docs/deep/nested.md:3: needle deep down"
    # "foo(" is not a valid regex: searched as plain text
    assert sandbox.grep("foo(") == "notes.txt:2: foo(bar) call"
    assert sandbox.grep("[unclosed") == "(no matches)"


def test_grep_no_match_and_empty_pattern(sandbox):
    assert sandbox.grep("zzz-not-there") == "(no matches)"
    with pytest.raises(SandboxError):
        sandbox.grep("")


def test_grep_stops_at_the_cap(sandbox, tree):
    write(tree / "many.txt", "\n".join(f"hit {i}" for i in range(GREP_CAP + 20)))
    out = sandbox.grep("hit", "many.txt").split("\n")
    assert len(out) == GREP_CAP + 1
    assert out[-1] == f"[... stopped at {GREP_CAP} matches]"
    assert out[0] == "many.txt:1: hit 0"


def test_grep_refuses_paths_outside(sandbox):
    with pytest.raises(SandboxError):
        sandbox.grep("needle", "..")


# -- run ------------------------------------------------------------------------------------------


def test_run_dispatches_and_refuses_unknown_tools_and_bad_arguments(sandbox):
    assert sandbox.run("read_file", {"path": "config/app.yaml"}) == "port: 8080\n"
    with pytest.raises(SandboxError):
        sandbox.run("write_file", {"path": "x"})
    with pytest.raises(SandboxError):
        sandbox.run("read_file", {"file": "x"})


# -- check_query_set ------------------------------------------------------------------------------


def q(id_: str, query_type: str = "keyword", sources: list[str] | None = None, **extra) -> dict:
    return {
        "id": id_,
        "query": f"query {id_}",
        "queryIntent": "find the thing",
        "queryType": query_type,
        "expectedSources": ["README.md"] if sources is None else sources,
        **extra,
    }


def test_check_query_set_valid():
    assert check_query_set({"queries": [q("q1"), q("q2", "off-topic", [])]}, count=2) == []
    assert check_query_set({"queries": [q("q1")]}) == []


def test_check_query_set_count_is_pinned():
    data = {"queries": [q("q1"), q("q2")]}
    too_few = check_query_set(data, count=3)
    assert too_few and any("queries" in p for p in too_few)
    too_many = check_query_set(data, count=1)
    assert too_many and any("queries" in p for p in too_many)


def test_check_query_set_duplicate_ids():
    problems = check_query_set({"queries": [q("q1"), q("q2"), q("q1")]}, count=3)
    assert problems == ["query ids must be unique; repeated: q1"]


@pytest.mark.parametrize(
    "bad",
    [
        {"queries": []},
        {},
        {"queries": [q("q1", "made-up-type")]},
        {"queries": [q("bad id with spaces")]},
        {"queries": [q("q1", extra_field=1)]},
        {"queries": [{k: v for k, v in q("q1").items() if k != "queryIntent"}]},
        {"queries": [q("q1")], "extra": True},
        [],
    ],
)
def test_check_query_set_schema_problems(bad):
    assert check_query_set(bad) != []


# -- filter_queries -------------------------------------------------------------------------------


def test_filter_queries_keeps_valid_and_drops_with_reasons(tree):
    data = {
        "queries": [
            q("ok1", "keyword", ["docs/guide.md"]),
            q("ok2", "natural-language", ["./docs/deep/nested.md", "README.md"]),
            q("ok3", "off-topic", []),
            q("missing", "keyword", ["docs/guide.md", "docs/nope.md"]),
            q("offsrc", "off-topic", ["README.md"]),
            q("nosrc", "conceptual", []),
            q("hidden", "keyword", [".secret.md"]),
        ]
    }
    kept, dropped = filter_queries(data, tree)
    assert [k.id for k in kept] == ["ok1", "ok2", "ok3"]
    assert kept[1].expectedSources == ["docs/deep/nested.md", "README.md"]
    reasons = {d["id"]: d["reason"] for d in dropped}
    assert set(reasons) == {"missing", "offsrc", "nosrc", "hidden"}
    assert reasons["missing"] == "expected sources not in the corpus: docs/nope.md"
    assert reasons["offsrc"] == "off-topic query with expected sources"
    assert reasons["nosrc"] == "no expected sources"
    assert "not in the corpus" in reasons["hidden"]
    assert all(d["query"] == f"query {d['id']}" for d in dropped)
