"""Walking a fixtures tree: which files are part of the corpus and which are skipped, and why."""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_EXTENSIONS: tuple[str, ...] = ("md", "markdown", "txt", "yaml", "yml", "json", "py")
DEFAULT_EXCLUDES: tuple[str, ...] = ("node_modules", "__pycache__", "venv", ".venv", "build", "dist", "site-packages")
DEFAULT_MAX_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class CorpusFile:
    """One file of the corpus: ``source``, its relative POSIX path in NFC, is its id everywhere; ``path``
    is the name on disk, which may be NFD."""

    source: str
    path: Path
    size: int


@dataclass
class WalkResult:
    files: list[CorpusFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def parse_extensions(value: str | None) -> tuple[str, ...]:
    """``"md, .txt,PY"`` -> ``("md", "txt", "py")``; None or empty -> the defaults."""
    if not value:
        return DEFAULT_EXTENSIONS
    exts = tuple(dict.fromkeys(p.strip().lower().lstrip(".") for p in value.split(",") if p.strip()))
    return exts or DEFAULT_EXTENSIONS


def normalize_source(source: str) -> str:
    """A path in Unicode NFC: apply it to any path compared with a source."""
    return unicodedata.normalize("NFC", source)


def is_hidden(part: str) -> bool:
    return part.startswith(".") and part not in (".", "..")


def walk_corpus(
    root: Path,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> WalkResult:
    """The files under ``root`` that belong in the index, by source. Hidden, excluded and other extensions
    are left out silently; directory symlinks never followed; files over ``max_bytes``, symlinks leading
    outside, unreadable entries and NFC duplicates skipped with a reason. Raises NotADirectoryError."""
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"fixtures folder not found or not a folder: {root}")
    real_root = root.resolve()
    wanted = {e.lower() for e in extensions}
    result = WalkResult()
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not is_hidden(d) and d not in excludes)
        for name in sorted(filenames):
            if is_hidden(name):
                continue
            ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
            if ext not in wanted:
                continue
            path = Path(dirpath) / name
            source = path.relative_to(root).as_posix()
            try:
                source.encode("utf-8")
            except UnicodeEncodeError:
                result.skipped.append((source.encode("utf-8", "backslashreplace").decode("ascii"), "file name is not valid UTF-8"))
                continue
            source = unicodedata.normalize("NFC", source)
            if source in seen:
                result.skipped.append((source, "same name as another file once Unicode-normalised (NFC)"))
                continue
            try:
                if path.is_symlink():
                    target = path.resolve()
                    if not target.is_relative_to(real_root):
                        result.skipped.append((source, "symlink outside the root"))
                        continue
                if not path.is_file():
                    result.skipped.append((source, "not a regular file"))
                    continue
                size = path.stat().st_size
            except OSError as exc:
                result.skipped.append((source, f"unreadable: {exc.strerror or exc}"))
                continue
            if size > max_bytes:
                result.skipped.append((source, f"larger than {max_bytes} bytes"))
                continue
            seen.add(source)
            result.files.append(CorpusFile(source=source, path=path, size=size))
    result.files.sort(key=lambda f: f.source)
    return result
