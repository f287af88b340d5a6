"""The corpus as phase one sees it: every file's folder, format, language, text and headings, and the
word statistics the checks measure against. Built once per phase one from the files the index would
hold. Languages come from py3langid (Lui and Baldwin 2012), told on prose only and only when it can be
trusted; docs/query-sets.md gives the rules and their measurements.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from judge_runner.core.textproc import STOPWORDS, cjk_bigrams
from judge_runner.corpus.chunk import markdown_headings
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS, walk_corpus

ROOT_FOLDER = "(root)"
NO_LANGUAGE = "-"
"""The language of a file without enough prose to tell."""
PROSE_FORMATS = frozenset({"md", "markdown", "txt", "rst", "adoc"})
MIN_PROSE_CHARS = 120
"""Characters of prose below which no language is told outside the Latin script."""
MIN_LATIN_PROSE_CHARS = 400
"""Characters of prose below which no language is told in the Latin script, where terse English notes read
as Latin or German with high probability."""
MIN_LANGUAGE_PROBABILITY = 0.9
"""py3langid's normalised probability below which no language is told."""
_LATIN_SHARE = 0.5  # prose whose letters are at least half Latin script is held to MIN_LATIN_PROSE_CHARS
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.MULTILINE | re.DOTALL)
_WORDS = re.compile(r"[^\W\d_]{2,}")
_TOKEN = re.compile(r"[^\W_]+")
_PUNCT = re.compile(r"[^\w\s]+")


@cache
def _identifier() -> Any:
    """py3langid's identifier, loaded once per process (about 1 s)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _latin_share(prose: str) -> float:
    """The share of letters in the Latin script (U+0000-024F, U+1E00-1EFF)."""
    letters = [ch for ch in prose if ch.isalpha()]
    latin = sum(1 for ch in letters if ord(ch) <= 0x024F or 0x1E00 <= ord(ch) <= 0x1EFF)
    return latin / len(letters) if letters else 0.0


def detect_language(text: str, fmt: str) -> str:
    """An ISO 639-1 code, or :data:`NO_LANGUAGE` when ``fmt`` is not prose, the prose is too short, the
    probability too low, or its two halves read as different languages."""
    if fmt not in PROSE_FORMATS:
        return NO_LANGUAGE
    words = _WORDS.findall(_FENCE.sub(" ", text))
    prose = " ".join(words)[:2000]
    floor = MIN_LATIN_PROSE_CHARS if _latin_share(prose) >= _LATIN_SHARE else MIN_PROSE_CHARS
    if len(prose) < floor:
        return NO_LANGUAGE
    language, probability = _identifier().classify(prose)
    if probability < MIN_LANGUAGE_PROBABILITY:
        return NO_LANGUAGE
    kept = prose.split()
    half = len(kept) // 2
    if half and any(_identifier().classify(" ".join(part))[0] != language for part in (kept[:half], kept[half:])):
        return NO_LANGUAGE
    return str(language)


def normalise_text(text: str) -> str:
    """NFKC, case-folded, punctuation as spaces, spaces collapsed."""
    return " ".join(_PUNCT.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def clean_heading(heading: str) -> str:
    """A heading without list numbering and emphasis (``"1. Clone the repos"`` -> ``"Clone the repos"``)."""
    heading = re.sub(r"^(?:\d+[.)]|step \d+:?|day [\d–-]+:)\s*", "", heading.strip(), flags=re.I)
    return heading.replace("`", "").replace("*", "").strip()


def stem(word: str) -> str:
    """Lower-cased; words over five characters lose their last two (the honesty gate's ``term_coverage`` rule)."""
    word = word.lower()
    return word if len(word) <= 5 else word[:-2]


def content_stems(text: str) -> list[str]:
    """The stems of content words (CJK as bigrams), stopwords dropped, each once; all when every one is a stopword."""
    words = [w.lower() for w in _TOKEN.findall(cjk_bigrams(text))]
    content = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(stem(w) for w in content))


@dataclass(frozen=True)
class ProfiledFile:
    """One corpus file: ``source`` (NFC), ``folder``, ``subfolder`` (first two levels), ``format``,
    ``language``, decoded ``text``, cleaned ``headings`` and ``stems``."""

    source: str
    folder: str
    subfolder: str
    format: str
    language: str
    text: str
    headings: tuple[str, ...]
    stems: frozenset[str]


def folder_of(source: str) -> str:
    """A source's top-level folder, or :data:`ROOT_FOLDER`."""
    return source.split("/", 1)[0] if "/" in source else ROOT_FOLDER


def _subfolder(source: str) -> str:
    parts = source.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else folder_of(source)


@dataclass
class CorpusProfile:
    """The profiled files by source (sorted), with document frequencies of word stems."""

    root: Path
    files: dict[str, ProfiledFile]
    document_frequency: Counter[str] = field(default_factory=Counter)
    _heading_files: dict[str, frozenset[str]] | None = None

    def __post_init__(self) -> None:
        if not self.document_frequency:
            self.document_frequency = Counter(s for f in self.files.values() for s in f.stems)

    def idf(self, word_stem: str) -> float:
        """BM25's (Robertson-Spärck Jones) ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the N files; always above 0."""
        n, df = len(self.files), self.document_frequency.get(word_stem, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def heading_files(self, text: str) -> frozenset[str]:
        if self._heading_files is None:
            index: dict[str, set[str]] = {}
            for f in self.files.values():
                for heading in f.headings:
                    index.setdefault(normalise_text(heading), set()).add(f.source)
            self._heading_files = {k: frozenset(v) for k, v in index.items()}
        return self._heading_files.get(normalise_text(text), frozenset())

    def counts(self, attribute: str) -> Counter[str]:
        return Counter(getattr(f, attribute) for f in self.files.values())

    def outline(self, subfolders: int = 6) -> str:
        """The outline for the agent's first turn: files per top-level folder (its largest ``subfolders``),
        format and language, with shares."""
        total = len(self.files) or 1

        def share(n: int) -> str:
            return f"{n} files, {n / total:.0%}"

        lines = [f"{len(self.files)} files in all.", "", "By folder:"]
        by_sub = self.counts("subfolder")
        for folder, n in self.counts("folder").most_common():
            subs = [(s, k) for s, k in by_sub.most_common() if s.startswith(folder + "/")][:subfolders]
            detail = f" (largest: {', '.join(f'{s}/ {k}' for s, k in subs)})" if len(subs) > 1 else ""
            lines.append(f"- {folder if folder == ROOT_FOLDER else folder + '/'}: {share(n)}{detail}")
        lines += ["", "By format:"] + [f"- {fmt}: {share(n)}" for fmt, n in self.counts("format").most_common()]
        languages = self.counts("language")
        lines += ["", "By language (of the prose in markdown and text files):"]
        lines += [f"- {lang if lang != NO_LANGUAGE else 'no prose to tell'}: {share(n)}" for lang, n in languages.most_common()]
        return "\n".join(lines)


def profile_corpus(root: Path, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS) -> CorpusProfile:
    """Unreadable, binary and empty files are left out, as the indexer skips them. Raises NotADirectoryError
    for a missing root."""
    files: dict[str, ProfiledFile] = {}
    for file in walk_corpus(Path(root), extensions=extensions).files:
        try:
            text = decode(file.path.read_bytes()).text
        except (OSError, BinaryContent):
            continue
        if not text.strip():
            continue
        fmt = file.source.rsplit(".", 1)[-1].lower() if "." in file.source.rsplit("/", 1)[-1] else ""
        headings: tuple[str, ...] = ()
        if fmt in ("md", "markdown"):
            headings = tuple(h for h in (clean_heading(t) for _, t in markdown_headings(text).values()) if h)
        files[file.source] = ProfiledFile(
            file.source,
            folder_of(file.source),
            _subfolder(file.source),
            fmt,
            detect_language(text, fmt),
            text,
            headings,
            frozenset(content_stems(text)),
        )
    return CorpusProfile(Path(root), files)
