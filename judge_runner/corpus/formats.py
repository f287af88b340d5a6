"""One chunker per file format: markdown by heading, YAML by document and top-level key (``safe_load``
only), JSON by top-level member, Python by top-level function and class, anything else by paragraph. A
file that does not parse is chunked as text, with a note; lone surrogates become U+FFFD.
"""

from __future__ import annotations

import ast
import json
import re
from bisect import bisect_left
from dataclasses import dataclass, field, replace

import yaml

from judge_runner.core.textproc import scrub_unencodable
from judge_runner.corpus.chunk import MAX_CHUNK_CHARS, Chunk, chunk_text, pack_lines, split_lines
from judge_runner.corpus.frontmatter import parse_front_matter
from judge_runner.corpus.read import normalize_newlines

_YAML_KEY = re.compile(r"^(?:\"([^\"]+)\"|'([^']+)'|([^\s#\-\[\]{}&*!|>'\"%@`][^:#]*?))\s*:(?:\s|$)")
_YAML_SEPARATOR = re.compile(r"^---(?:\s.*)?$")


@dataclass
class ChunkedDocument:
    chunks: list[Chunk]
    notes: list[str] = field(default_factory=list)


def _runs(lines: list[str], starts: dict[int, str], default_anchor: str | None) -> list[Chunk]:
    """``lines`` chunked at ``starts`` (``{1-based line: anchor}``)."""
    chunks: list[Chunk] = []
    anchor = default_anchor
    block: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        if number in starts:
            chunks.extend(pack_lines(block, anchor))
            block, anchor = [], starts[number]
        block.append((number, line))
    chunks.extend(pack_lines(block, anchor))
    return chunks


SMALL_CHUNK_CHARS = 300
MAX_ANCHOR_CHARS = 100


def _scope(anchor: str | None) -> str:
    return anchor.rsplit(" > ", 1)[0] if anchor and " > " in anchor else ""


def merge_small(chunks: list[Chunk], cap: int = MAX_CHUNK_CHARS, small: int = SMALL_CHUNK_CHARS) -> list[Chunk]:
    """Adjacent small chunks of one scope merged up to ``cap``, so ``version: 2`` is no chunk of its own."""
    merged: list[Chunk] = []
    for chunk in chunks:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and len(prev.text) + 1 + len(chunk.text) <= cap
            and (len(prev.text) < small or len(chunk.text) < small)
            and (_scope(prev.anchor) == _scope(chunk.anchor) or prev.anchor == _scope(chunk.anchor))
        ):
            key = chunk.anchor.rsplit(" > ", 1)[-1] if chunk.anchor else None
            anchor = prev.anchor or chunk.anchor
            if prev.anchor and key and prev.anchor != _scope(chunk.anchor):
                anchor = f"{prev.anchor}, {key}"
            elif prev.anchor == _scope(chunk.anchor):
                anchor = chunk.anchor
            if anchor and len(anchor) > MAX_ANCHOR_CHARS:
                anchor = anchor[: MAX_ANCHOR_CHARS - 1].rsplit(",", 1)[0] + ", …"
            merged[-1] = Chunk(prev.text + "\n" + chunk.text, anchor, prev.line_start, chunk.line_end)
        else:
            merged.append(chunk)
    return merged


def _yaml_label(document: object, index: int) -> str:
    label = f"document {index + 1}"
    if isinstance(document, dict) and isinstance(document.get("kind"), str):
        name = document.get("metadata", {}).get("name") if isinstance(document.get("metadata"), dict) else None
        label += f" ({document['kind']}{' ' + str(name) if name else ''})"
    return label


def chunk_yaml(text: str) -> ChunkedDocument:
    """Raises yaml.YAMLError when the file does not parse."""
    documents = list(yaml.safe_load_all(text))
    lines = split_lines(text)
    starts: dict[int, str] = {}
    doc_index = 0
    multi = len(documents) > 1
    seen_content = False
    for number, line in enumerate(lines, start=1):
        if _YAML_SEPARATOR.match(line):
            if seen_content:
                doc_index += 1
            seen_content = False
            if multi and doc_index < len(documents):
                starts[number] = _yaml_label(documents[doc_index], doc_index)
            continue
        if line.strip() and not line.lstrip().startswith("#"):
            seen_content = True
        match = _YAML_KEY.match(line)
        if match:
            key = next(g for g in match.groups() if g is not None).strip()
            label = _yaml_label(documents[doc_index], doc_index) if doc_index < len(documents) else f"document {doc_index + 1}"
            starts[number] = f"{label} > {key}" if multi else key
    return ChunkedDocument(merge_small(_runs(lines, starts, None)))


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')
_NON_SPACE = re.compile(r"\S")


def _top_level_offsets(text: str) -> list[int]:
    """Offsets where each top-level member of parsed JSON starts; one may be an empty container's close."""
    offsets: list[int] = []
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        ch = token.group()[0]
        if ch == '"':
            continue
        if ch in "[{":
            depth += 1
            starts = depth == 1
        elif ch in "]}":
            depth -= 1
            starts = False
        else:
            starts = depth == 1
        if starts:
            following = _NON_SPACE.search(text, token.end())
            if following:
                offsets.append(following.start())
    return offsets


def line_numbers(text: str, offsets: list[int]) -> list[int]:
    """The 1-based line of each character offset, in one linear pass."""
    newlines = [m.start() for m in re.finditer("\n", text)]
    return [bisect_left(newlines, offset) + 1 for offset in offsets]


def chunk_json(text: str) -> ChunkedDocument:
    """Each top-level member pretty-printed. Raises ValueError when the file does not parse."""
    data = json.loads(text)
    if not isinstance(data, (dict, list)) or not data:
        return ChunkedDocument(chunk_text(json.dumps(data, indent=2, ensure_ascii=False), "json"))
    offsets = [o for o in _top_level_offsets(text) if text[o] not in "]}"]
    members = list(data.items()) if isinstance(data, dict) else list(enumerate(data))
    lines_at = line_numbers(text, offsets)
    total_lines = text.count("\n") + 1
    chunks: list[Chunk] = []
    for i, (key, value) in enumerate(members):
        start = lines_at[i] if i < len(offsets) else 1
        end = max(start, lines_at[i + 1] - 1) if i + 1 < len(offsets) else total_lines
        anchor = str(key) if isinstance(data, dict) else f"[{key}]"
        pretty = json.dumps({key: value} if isinstance(data, dict) else value, indent=2, ensure_ascii=False)
        pretty_lines = pretty.split("\n")
        if isinstance(data, dict):
            pretty_lines = [l[2:] for l in pretty_lines[1:-1]]  # drop the wrapping braces
        if len(pretty) <= MAX_CHUNK_CHARS:
            chunks.append(Chunk("\n".join(pretty_lines), anchor, start, end))
        else:  # long member: pack its pretty-printed lines, all mapped to the member's line range
            for chunk in pack_lines([(start, l) for l in pretty_lines], anchor):
                chunks.append(Chunk(chunk.text, anchor, start, end))
    return ChunkedDocument(merge_small(chunks))


def chunk_python(text: str) -> ChunkedDocument:
    """The rest as ``(module)`` chunks. Raises SyntaxError when the file does not parse."""
    tree = ast.parse(text)
    lines = split_lines(text)
    definitions: dict[int, tuple[int, str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            definitions[first] = (node.end_lineno or node.lineno, node.name)
    chunks: list[Chunk] = []
    module: list[tuple[int, str]] = []
    number = 1
    while number <= len(lines):
        if number in definitions:
            chunks.extend(pack_lines(module, "(module)"))
            module = []
            end, name = definitions[number]
            chunks.extend(pack_lines([(n, lines[n - 1]) for n in range(number, end + 1)], name))
            number = end + 1
            continue
        module.append((number, lines[number - 1]))
        number += 1
    chunks.extend(pack_lines(module, "(module)"))
    return ChunkedDocument(chunks)


def chunk_markdown(text: str, fmt: str = "md") -> ChunkedDocument:
    """Front matter is blanked, never chunked, its ``title`` the first anchor; a chunk without a letter or
    digit is dropped."""
    lines = split_lines(text)
    front, note = parse_front_matter(lines)
    if front is None:
        return ChunkedDocument(_with_words(chunk_text(text, fmt)), [note] if note else [])
    body = "\n".join([""] * front.end_line + lines[front.end_line :])
    chunks = _with_words(chunk_text(body, fmt))
    if front.title:
        chunks = [replace(c, anchor=front.title) if c.anchor is None else c for c in chunks]
    return ChunkedDocument(chunks)


def _with_words(chunks: list[Chunk]) -> list[Chunk]:
    return [c for c in chunks if re.search(r"[^\W_]", c.text)]


_PARSERS = {
    "yaml": (chunk_yaml, yaml.YAMLError),
    "yml": (chunk_yaml, yaml.YAMLError),
    "json": (chunk_json, ValueError),
    "py": (chunk_python, (SyntaxError, ValueError)),
}


def _safe_chunks(document: ChunkedDocument) -> ChunkedDocument:
    """Lone surrogates as U+FFFD, with a note."""
    replaced = 0
    chunks = []
    for chunk in document.chunks:
        text, n = scrub_unencodable(chunk.text)
        anchor, m = scrub_unencodable(chunk.anchor) if chunk.anchor else (chunk.anchor, 0)
        replaced += n + m
        chunks.append(replace(chunk, text=text, anchor=anchor) if n or m else chunk)
    if replaced:
        document = ChunkedDocument(chunks, [*document.notes, "unencodable characters replaced by U+FFFD"])
    return document


def chunk_document(text: str, fmt: str) -> ChunkedDocument:
    """Chunk a decoded document by its extension. Never raises for bad content."""
    fmt = fmt.lower()
    text = normalize_newlines(text)
    if fmt in _PARSERS:
        parser, errors = _PARSERS[fmt]
        try:
            return _safe_chunks(parser(text))
        except errors as exc:
            reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            return _safe_chunks(ChunkedDocument(chunk_text(text, "txt"), [f"{fmt} did not parse ({reason}); indexed as text"]))
        except RecursionError:
            return _safe_chunks(ChunkedDocument(chunk_text(text, "txt"), [f"{fmt} nested too deeply; indexed as text"]))
    if fmt in ("md", "markdown"):
        return _safe_chunks(chunk_markdown(text, fmt))
    return _safe_chunks(ChunkedDocument(chunk_text(text, fmt)))
