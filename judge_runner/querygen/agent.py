"""Phase one: an LLM agent explores the fixtures with sandboxed file tools and writes the query set.

The tools see only the fixtures root: absolute paths, ``..``, symlinks leading out and hidden paths are
refused. The answer arrives through ``submit_queries`` and is checked as every writer's is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from string import Template

from judge_runner.core.models import QUERY_TYPES
from judge_runner.core.resources import load_prompt
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS, is_hidden, normalize_source, walk_corpus
from judge_runner.llm.base import ChatProvider, ToolResult, ToolSpec, Turn
from judge_runner.llm.errors import InvalidOutputError, RefusalError
from judge_runner.llm.pricing import add_cost
from judge_runner.querygen.profile import CorpusProfile, profile_corpus
from judge_runner.querygen.protocol import GenerationResult
from judge_runner.querygen.submitted import check_query_set, filter_queries, submit_schema

READ_CAP_CHARS = 12_000
READ_CAP_BYTES = 4 * READ_CAP_CHARS + 4  # enough for READ_CAP_CHARS characters in any encoding read (UTF-8, -16, -32), BOM included
LIST_CAP = 200
GREP_CAP = 50
MAX_TOOL_TURNS = 30
MAX_REASKS = 2


class SandboxError(ValueError):
    """A tool asked for a path outside the fixtures root, a hidden path, or one that does not exist."""


class FileSandbox:
    """Read-only file tools confined to ``root``. Each returns text for the model or raises SandboxError."""

    def __init__(self, root: Path, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS):
        self.root = Path(root).resolve()
        self.extensions = extensions
        self._paths: dict[str, Path] | None = None  # NFC source -> the file as named on disk

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` inside the root. Raises SandboxError."""
        if not isinstance(path, str):
            raise SandboxError("path must be a string")
        cleaned = path.strip() or "."
        pure = PurePosixPath(cleaned.replace("\\", "/"))
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", cleaned):
            raise SandboxError(f"absolute paths are not allowed: {path!r}; use a path relative to the knowledge-base root")
        if ".." in pure.parts:
            raise SandboxError(f"'..' is not allowed: {path!r}")
        if any(is_hidden(part) for part in pure.parts):
            raise SandboxError(f"hidden files and folders are not available: {path!r}")
        target = (self.root / pure).resolve()
        if not target.is_relative_to(self.root):
            raise SandboxError(f"{path!r} leads outside the knowledge base")
        if not target.exists():  # a name in NFC for a file or folder named in NFD on disk (or the reverse)
            found = self._on_disk(normalize_source(pure.as_posix()))
            if found is None:
                raise SandboxError(f"no such file or folder: {path!r}")
            target = found.resolve()
        return target

    def _on_disk(self, source: str) -> Path | None:
        """The file or folder on disk whose NFC path is ``source``."""
        if source in self._walk():
            return self._walk()[source]
        depth = len(PurePosixPath(source).parts)
        for name, path in self._walk().items():
            parts = PurePosixPath(name).parts
            if len(parts) > depth and "/".join(parts[:depth]) == source:
                return path.parents[len(parts) - depth - 1]
        return None

    def _rel(self, path: Path) -> str:
        return normalize_source(path.relative_to(self.root).as_posix()) or "."

    def list_dir(self, path: str = ".") -> str:
        """Entries of a folder, folders first with a trailing slash."""
        folder = self.resolve(path)
        if not folder.is_dir():
            raise SandboxError(f"not a folder: {path!r}")
        entries = []
        for child in sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            if is_hidden(child.name):
                continue
            try:
                if not child.resolve().is_relative_to(self.root):
                    continue
            except OSError:
                continue
            entries.append(self._rel(child) + ("/" if child.is_dir() else ""))
        if len(entries) > LIST_CAP:
            entries = entries[:LIST_CAP] + [f"... {len(entries) - LIST_CAP} more entries not shown"]
        return "\n".join(entries) if entries else "(empty folder)"

    def _walk(self) -> dict[str, Path]:
        """``{source (NFC): path on disk}``, walked once per sandbox."""
        if self._paths is None:
            self._paths = {f.source: f.path for f in walk_corpus(self.root, extensions=self.extensions).files}
        return self._paths

    def _files(self) -> list[str]:
        return list(self._walk())

    def glob(self, pattern: str) -> str:
        """Corpus files whose relative path matches a glob (``**`` spans folders)."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise SandboxError("pattern must be a non-empty string")
        pattern = pattern.strip()
        if ".." in PurePosixPath(pattern).parts or pattern.startswith("/"):
            raise SandboxError("patterns are relative to the knowledge-base root; '..' and absolute paths are not allowed")
        while pattern.startswith("./"):
            pattern = pattern[2:]
        regex = _glob_regex(pattern)
        matches = [s for s in self._files() if regex.fullmatch(s)]
        if len(matches) > LIST_CAP:
            return "\n".join(matches[:LIST_CAP]) + f"\n... {len(matches) - LIST_CAP} more matches not shown"
        return "\n".join(matches) if matches else "(no files match)"

    def read_file(self, path: str) -> str:
        """A file's text, cut at READ_CAP_CHARS characters with a note; at most :data:`READ_CAP_BYTES` are read."""
        target = self.resolve(path)
        if not target.is_file():
            raise SandboxError(f"not a file: {path!r}")
        try:
            size = target.stat().st_size
            with open(target, "rb") as handle:
                data = handle.read(READ_CAP_BYTES)
        except OSError as exc:
            raise SandboxError(f"{path!r} cannot be read: {exc.strerror or exc}") from None
        whole = len(data) >= size
        try:
            text = decode(data if whole else _whole_characters(data)).text  # as the indexer reads it (legacy encodings, UTF-16)
        except BinaryContent:
            raise SandboxError(f"{path!r} is a binary file") from None
        if whole and len(text) <= READ_CAP_CHARS:
            return text
        of = f"{len(text)} characters" if whole else f"a file of {size} bytes"
        return text[:READ_CAP_CHARS] + f"\n[... truncated: showing {READ_CAP_CHARS} of {of}]"

    def grep(self, pattern: str, path: str = ".") -> str:
        """Lines matching a case-insensitive regex (plain text when not a valid regex), as ``file:line: text``,
        at most GREP_CAP lines."""
        if not isinstance(pattern, str) or not pattern:
            raise SandboxError("pattern must be a non-empty string")
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except re.error:
            regex = re.compile(re.escape(pattern), re.IGNORECASE)
        base = self.resolve(path)
        prefix = self._rel(base)
        sources = [s for s in self._files() if prefix == "." or s == prefix or s.startswith(prefix.rstrip("/") + "/")]
        hits: list[str] = []
        for source in sources:
            try:
                text = decode(self._walk()[source].read_bytes()).text
            except (OSError, BinaryContent):
                continue
            for number, line in enumerate(text.split("\n"), start=1):  # numbered as the index numbers lines
                if regex.search(line):
                    hits.append(f"{source}:{number}: {line.strip()[:200]}")
                    if len(hits) >= GREP_CAP:
                        return "\n".join(hits) + f"\n[... stopped at {GREP_CAP} matches]"
        return "\n".join(hits) if hits else "(no matches)"

    def run(self, name: str, arguments: dict) -> str:
        """Dispatch a tool call by name. Raises SandboxError for unknown tools or bad arguments."""
        tools: dict[str, Callable[..., str]] = {
            "list_dir": self.list_dir,
            "glob": self.glob,
            "read_file": self.read_file,
            "grep": self.grep,
        }
        if name not in tools:
            raise SandboxError(f"unknown tool {name!r}")
        try:
            return tools[name](**arguments)
        except TypeError as exc:
            raise SandboxError(f"bad arguments for {name}: {exc}") from None


def _whole_characters(data: bytes) -> bytes:
    """``data`` without the UTF-8 character a cut may have split; bytes that are not UTF-8 are kept."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.start >= len(data) - 3:
            return data[: exc.start]
    return data


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob with ``**`` (any folders, including none), ``*`` and ``?`` as a regex."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


TOOLS = [
    ToolSpec(
        "list_dir",
        "List a folder of the knowledge base (path relative to its root; '.' is the root).",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False},
    ),
    ToolSpec(
        "glob",
        "Find files by glob pattern relative to the root, e.g. '**/*.md' or 'runbooks/*.yaml'.",
        {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"], "additionalProperties": False},
    ),
    ToolSpec(
        "read_file",
        f"Read a file (relative path). Long files are cut at {READ_CAP_CHARS} characters.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False},
    ),
    ToolSpec(
        "grep",
        "Search file contents for a case-insensitive regular expression; optional folder or file path to limit it.",
        {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
            "additionalProperties": False,
        },
    ),
]


def submit_tool(count: int) -> ToolSpec:
    """The ``submit_queries`` tool, pinned to exactly ``count`` queries."""
    return ToolSpec("submit_queries", "Submit the finished query set. Call it exactly once, when done.", submit_schema(count))


def first_turn(root: Path, count: int, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS, profile: CorpusProfile | None = None) -> str:
    """The agent's first turn: the root listing and the corpus's outline, so queries spread over the corpus."""
    profile = profile or profile_corpus(root, extensions)
    listing = FileSandbox(root, extensions).list_dir(".")
    return Template(load_prompt("generate_user.md")).substitute(count=count, root_listing=listing, corpus_outline=profile.outline())


def generate_with_llm(
    provider: ChatProvider,
    root: Path,
    count: int,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    log: Callable[[str], None] = lambda message: None,
    profile: CorpusProfile | None = None,
) -> GenerationResult:
    """Run the exploring agent until it submits a valid query set (``profile``: default profiled here).

    Raises InvalidOutputError when no valid set arrives within MAX_TOOL_TURNS turns and MAX_REASKS
    re-asks, RefusalError on a refusal, and any LLMError from the provider.
    """
    sandbox = FileSandbox(root, extensions)
    system = Template(load_prompt("generate_system.md")).substitute(count=count, query_types=", ".join(QUERY_TYPES))
    user = first_turn(root, count, extensions, profile)
    tools = TOOLS + [submit_tool(count)]
    turns = [Turn("user", text=user)]
    reasks = 0
    tool_calls = 0
    cost: float | None = 0.0
    for turn_number in range(MAX_TOOL_TURNS):
        force = "submit_queries" if turn_number == MAX_TOOL_TURNS - 1 else None
        reply = provider.complete(system, turns, tools, force_tool=force, max_tokens=8192)
        cost = add_cost(cost, reply.cost_usd)
        if reply.stop == "refusal":
            raise RefusalError("the model refused to write queries", reply.attempts)
        turns.append(Turn("assistant", text=reply.text or None, tool_uses=reply.tool_uses))
        if not reply.tool_uses:
            reasks += 1
            if reasks > MAX_REASKS:
                raise InvalidOutputError("the model stopped without calling submit_queries")
            turns.append(Turn("user", text=f"Call submit_queries with exactly {count} queries now."))
            continue
        results = []
        for use in reply.tool_uses:
            tool_calls += 1
            if use.name == "submit_queries":
                problems = check_query_set(use.input, count)
                if not problems:
                    kept, dropped = filter_queries(use.input, root, extensions)
                    for d in dropped:
                        log(f"dropped query {d['id']}: {d['reason']}")
                    return GenerationResult(kept, len(use.input["queries"]), dropped, reply.model, cost, tool_calls)
                reasks += 1
                if reasks > MAX_REASKS:
                    raise InvalidOutputError("submit_queries input failed its schema: " + "; ".join(problems[:5]))
                results.append(ToolResult(use.id, "Invalid query set, fix and call submit_queries again:\n" + "\n".join(problems), True))
                continue
            try:
                results.append(ToolResult(use.id, sandbox.run(use.name, use.input)))
            except SandboxError as exc:
                results.append(ToolResult(use.id, str(exc), True))
        turns.append(Turn("user", tool_results=results))
    raise InvalidOutputError(f"no query set after {MAX_TOOL_TURNS} turns")


class LLMQueryWriter:
    """The :class:`~judge_runner.querygen.protocol.QueryWriter` of an LLM: :func:`generate_with_llm`."""

    heuristic = False

    def __init__(self, provider: ChatProvider):
        self.provider = provider
        self.name = provider.name
        self.model = provider.model

    def write_queries(
        self,
        root: Path,
        count: int,
        extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
        log: Callable[[str], None] = lambda message: None,
        profile: CorpusProfile | None = None,
    ) -> GenerationResult:
        return generate_with_llm(self.provider, Path(root), count, extensions, log, profile)
