"""judge_runner.corpus.walk and judge_runner.corpus.read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judge_runner.corpus.read import BinaryContent, Decoded, decode
from judge_runner.corpus.walk import (
    DEFAULT_EXTENSIONS,
    WalkResult,
    is_hidden,
    parse_extensions,
    walk_corpus,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def write(path: Path, text: str = "content\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def sources(result: WalkResult) -> list[str]:
    return [f.source for f in result.files]


# -- the shipped fixtures -------------------------------------------------------------------------


def test_fixtures_hidden_files_and_folders_are_skipped():
    result = walk_corpus(FIXTURES)
    found = sources(result)
    assert found, "the fixtures tree should yield files"
    assert not any(s.startswith(".trash/") or "/.trash/" in s for s in found)
    assert ".lantern-local" not in found
    assert not any(part.startswith(".") for s in found for part in s.split("/"))
    # hidden entries are left out silently, not reported as skipped
    assert not any(".trash" in s or ".lantern-local" in s for s, _ in result.skipped)
    # sanity: the hidden entries do exist on disk, so the check above means something
    assert (FIXTURES / ".trash" / "old-secrets.md").is_file()
    assert (FIXTURES / ".lantern-local").is_file()


def test_fixtures_sources_are_relative_posix_sorted_and_known_files_present():
    result = walk_corpus(FIXTURES)
    found = sources(result)
    assert found == sorted(found)
    assert len(found) == len(set(found))
    for expected in (
        "README.md",
        "guides/onboarding.md",
        "guides/install-notes.markdown",
        "i18n/zh/search-service-overview.md",
        "config/indexer.yaml",
        "data/synonyms.json",
        "scripts/config_loader.py",
        "notes/TODO.txt",
    ):
        assert expected in found
    for f in result.files:
        assert not f.source.startswith("/")
        assert "\\" not in f.source
        assert f.path == FIXTURES / f.source
        assert f.size == (FIXTURES / f.source).stat().st_size


def test_fixtures_extension_filter():
    only_md = walk_corpus(FIXTURES, extensions=("md",))
    assert only_md.files
    assert all(s.endswith(".md") for s in sources(only_md))
    assert "guides/install-notes.markdown" not in sources(only_md)
    everything = walk_corpus(FIXTURES)
    assert set(sources(only_md)) == {s for s in sources(everything) if s.endswith(".md")}


# -- parse_extensions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("md, .txt,PY", ("md", "txt", "py")),
        ("md", ("md",)),
        (".YAML,.yml", ("yaml", "yml")),
        ("md,md, MD", ("md",)),
        ("  json  ,", ("json",)),
    ],
)
def test_parse_extensions(value, expected):
    assert parse_extensions(value) == expected


@pytest.mark.parametrize("value", [None, "", " , ,"])
def test_parse_extensions_empty_gives_defaults(value):
    assert parse_extensions(value) == DEFAULT_EXTENSIONS


def test_is_hidden():
    assert is_hidden(".git") and is_hidden(".trash") and is_hidden(".env")
    assert not is_hidden(".") and not is_hidden("..")
    assert not is_hidden("notes") and not is_hidden("a.md")


# -- tmp trees ------------------------------------------------------------------------------------


def test_extension_filter_is_case_insensitive_and_needs_a_dot(tmp_path):
    write(tmp_path / "UPPER.MD")
    write(tmp_path / "lower.md")
    write(tmp_path / "md")  # no extension at all
    write(tmp_path / "file.txt")
    write(tmp_path / "archive.md.bak")
    assert sources(walk_corpus(tmp_path, extensions=("md",))) == ["UPPER.MD", "lower.md"]


def test_hidden_and_excluded_folders_are_skipped(tmp_path):
    write(tmp_path / "keep.md")
    write(tmp_path / ".hidden.md")
    write(tmp_path / ".git" / "config.md")
    write(tmp_path / "docs" / ".draft" / "x.md")
    write(tmp_path / "node_modules" / "pkg" / "readme.md")
    write(tmp_path / "__pycache__" / "x.py")
    write(tmp_path / "docs" / "guide.md")
    result = walk_corpus(tmp_path)
    assert sources(result) == ["docs/guide.md", "keep.md"]
    assert result.skipped == []


def test_size_limit_skips_with_reason(tmp_path):
    write(tmp_path / "small.md", "x" * 50)
    write(tmp_path / "exact.md", "x" * 100)
    write(tmp_path / "big.md", "x" * 101)
    result = walk_corpus(tmp_path, max_bytes=100)
    assert sources(result) == ["exact.md", "small.md"]
    assert len(result.skipped) == 1
    source, reason = result.skipped[0]
    assert source == "big.md"
    assert "larger than 100 bytes" in reason


def test_directory_symlink_to_a_parent_is_not_followed(tmp_path):
    root = tmp_path / "root"
    write(root / "a.md")
    write(root / "sub" / "b.md")
    write(tmp_path / "outside.md")
    os.symlink(root, root / "loop")  # root/loop -> root
    os.symlink(tmp_path, root / "sub" / "up")  # root/sub/up -> the parent of root
    result = walk_corpus(root)
    assert sources(result) == ["a.md", "sub/b.md"]
    assert not any("loop" in s or "up/" in s for s in sources(result))


def test_file_symlink_outside_the_root_is_skipped_with_reason(tmp_path):
    root = tmp_path / "root"
    write(root / "a.md")
    secret = write(tmp_path / "secret.md", "outside the corpus\n")
    os.symlink(secret, root / "link.md")
    result = walk_corpus(root)
    assert sources(result) == ["a.md"]
    assert result.skipped == [("link.md", "symlink outside the root")]


def test_file_symlink_inside_the_root_is_kept(tmp_path):
    write(tmp_path / "a.md", "hello\n")
    os.symlink(tmp_path / "a.md", tmp_path / "alias.md")
    result = walk_corpus(tmp_path)
    assert sources(result) == ["a.md", "alias.md"]
    assert result.skipped == []


def test_dangling_symlink_is_skipped_with_reason(tmp_path):
    write(tmp_path / "a.md")
    os.symlink(tmp_path / "missing.md", tmp_path / "dangling.md")
    result = walk_corpus(tmp_path)
    assert sources(result) == ["a.md"]
    assert [s for s, _ in result.skipped] == ["dangling.md"]


def test_root_that_is_not_a_folder_raises(tmp_path):
    with pytest.raises(NotADirectoryError):
        walk_corpus(tmp_path / "missing")
    f = write(tmp_path / "file.md")
    with pytest.raises(NotADirectoryError):
        walk_corpus(f)


def test_root_given_as_a_string_works(tmp_path):
    write(tmp_path / "x" / "y.md")
    assert sources(walk_corpus(str(tmp_path))) == ["x/y.md"]


# -- decode ---------------------------------------------------------------------------------------


def test_decode_utf8():
    result = decode("héllo wörld 索引 🚀".encode())
    assert result == Decoded("héllo wörld 索引 🚀", "utf-8")


def test_decode_utf8_with_bom_strips_the_bom():
    result = decode(b"\xef\xbb\xbf" + "# Titel äöü".encode())
    assert result.encoding == "utf-8-sig"
    assert result.text == "# Titel äöü"
    assert not result.text.startswith("\ufeff")


def test_decode_damaged_utf8_falls_back_to_lossy():
    # mostly valid UTF-8 with a few damaged bytes stays UTF-8 (legacy text is detected instead: see
    # test_hostile_corpus.py, where b"caf\xe9" is read as windows-1252)
    result = decode("café über naïve ok ".encode() + b"\xff\xfe end")
    assert result.encoding == "utf-8-lossy"
    assert result.text.startswith("café über naïve ok ")
    assert result.text.endswith(" end")
    assert "\ufffd" in result.text


def test_decode_empty_bytes():
    assert decode(b"") == Decoded("", "utf-8")


def test_decode_nul_bytes_are_binary():
    with pytest.raises(BinaryContent):
        decode(b"PK\x03\x04\x00\x00binary")
    with pytest.raises(ValueError):  # BinaryContent is a ValueError
        decode(b"text then \x00")


def test_decode_nul_only_checked_in_the_first_8_kib():
    data = b"a" * 8192 + b"\x00tail"
    result = decode(data)
    assert result.encoding == "utf-8"
    assert result.text.startswith("a" * 8192)
