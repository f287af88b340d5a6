"""The corpus as phase one sees it: every file's folder, format, language, text and headings, the
corpus's outline (how many files each folder, format and language holds), and the word statistics the
query-set checks measure against (:mod:`judge_runner.querygen.checks`).

Built once per phase one (:func:`profile_corpus`) from the files the index would hold
(:func:`judge_runner.corpus.walk.walk_corpus`, decoded as the indexer decodes them), so the offline writer's
sampling, the agent's first turn, the checks and the query-set card all count the same files.

- **folder**: a file's top-level folder (``til/git/x.md`` -> ``til``); files at the root are in
  :data:`ROOT_FOLDER`. **subfolder**: its first two levels (``til/git``), for spreading inside a folder.
- **format**: the extension, lower-cased (``md``, ``yaml``).
- **language**: an ISO 639-1 code from py3langid (Lui and Baldwin 2012, "langid.py: An Off-the-shelf
  Language Identification Tool"; the model ships inside the package), read on the prose of markdown and
  text files only (fenced code removed), and only when it can be trusted (:func:`detect_language`):
  enough prose (:data:`MIN_LATIN_PROSE_CHARS` characters in the Latin script, :data:`MIN_PROSE_CHARS` in
  others), a normalised probability of at least :data:`MIN_LANGUAGE_PROBABILITY`, and both halves of the
  prose read as the same language. Config and code files, and prose too short or too mixed to tell, are
  :data:`NO_LANGUAGE` ("unknown": never another language, so never a reason to type a query
  multilingual). On the shared fixtures-kb (653 files) every README and note is ``en``; on raw config
  files the model guesses wildly (``uz`` for a password file), which is why only prose is read.
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
"""The folder name of files at the top of the corpus."""
NO_LANGUAGE = "-"
"""The language of a file without enough prose to tell (config, code, short notes)."""
PROSE_FORMATS = frozenset({"md", "markdown", "txt", "rst", "adoc"})
MIN_PROSE_CHARS = 120
"""Characters of prose below which no language is told in a script other than Latin (CJK, Hangul, Cyrillic,
Greek, Arabic...): a script few languages share is itself evidence: 120-character windows of the fixtures' seven
non-English files (the Japanese, Chinese and Korean notes have 393-436 characters) were all told right
(65 of 65)."""
MIN_LATIN_PROSE_CHARS = 400
"""Characters of prose below which no language is told in the Latin script, where languages share an
alphabet and borrowed words. Terse English notes ("Agenda: status quo, ad hoc fixes, data retention per
tenant, index rebuild via cron ...") read as Latin at probability 0.996, and no probability floor or
score margin separates them from real Latin, German or Dutch. Measured on 300 jargon notes made of such
English lines: with the halves check, 32 of 300 were told another language at 200 characters, 15 at 300,
0 at 400, while 400-character windows of fluent English (the docs and the fixtures, 327) and of the
fixtures' French and German files were all told right."""
MIN_LANGUAGE_PROBABILITY = 0.9
"""The normalised probability (py3langid, ``norm_probs``) below which no language is told; it is high for
most wrong answers too, hence the length floors and the halves check."""
_LATIN_SHARE = 0.5  # prose whose letters are at least half Latin script is held to MIN_LATIN_PROSE_CHARS
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.MULTILINE | re.DOTALL)
_WORDS = re.compile(r"[^\W\d_]{2,}")
_TOKEN = re.compile(r"[^\W_]+")
_PUNCT = re.compile(r"[^\w\s]+")


@cache
def _identifier() -> Any:
    """py3langid's identifier with normalised probabilities, loaded once per process (about 1 s)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _latin_share(prose: str) -> float:
    """The share of ``prose``'s letters in the Latin script (U+0000-024F and U+1E00-1EFF: ASCII, the
    accented letters of European languages, Vietnamese)."""
    letters = [ch for ch in prose if ch.isalpha()]
    latin = sum(1 for ch in letters if ord(ch) <= 0x024F or 0x1E00 <= ord(ch) <= 0x1EFF)
    return latin / len(letters) if letters else 0.0


def detect_language(text: str, fmt: str) -> str:
    """The language of a document of format ``fmt`` (see the module docstring): an ISO 639-1 code, or
    :data:`NO_LANGUAGE` when it is not prose, or its prose is shorter than :data:`MIN_LATIN_PROSE_CHARS`
    (Latin script) or :data:`MIN_PROSE_CHARS` (other scripts), or the model's normalised probability is
    under :data:`MIN_LANGUAGE_PROBABILITY`, or the two halves of the prose read as different languages."""
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
    """The form two texts are compared in: NFKC, case-folded, punctuation as spaces, spaces collapsed
    (``"Clone the repos!"`` and ``"clone the  repos"`` are equal)."""
    return " ".join(_PUNCT.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def clean_heading(heading: str) -> str:
    """A heading without list numbering and markdown emphasis (``"1. Clone the repos"`` -> ``"Clone the repos"``)."""
    heading = re.sub(r"^(?:\d+[.)]|step \d+:?|day [\d–-]+:)\s*", "", heading.strip(), flags=re.I)
    return heading.replace("`", "").replace("*", "").strip()


def stem(word: str) -> str:
    """A crude stem (lower-cased; words over five characters lose their last two), the rule the honesty
    gate's ``term_coverage`` compares words by, so ``keys`` and ``key``, ``rotating`` and ``rotate`` meet."""
    word = word.lower()
    return word if len(word) <= 5 else word[:-2]


def content_stems(text: str) -> list[str]:
    """The stems of ``text``'s content words: word tokens (CJK as bigrams) without stopwords, in order,
    each once; all tokens when every one is a stopword."""
    words = [w.lower() for w in _TOKEN.findall(cjk_bigrams(text))]
    content = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(stem(w) for w in content))


@dataclass(frozen=True)
class ProfiledFile:
    """One corpus file: ``source`` (NFC, as everywhere), ``folder``, ``subfolder``, ``format``,
    ``language`` (see the module docstring), decoded ``text``, its markdown ``headings`` (cleaned, in
    order) and the set of ``stems`` of its words."""

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
    """The profiled files of a corpus by source (sorted), with document frequencies of word stems."""

    root: Path
    files: dict[str, ProfiledFile]
    document_frequency: Counter[str] = field(default_factory=Counter)
    _heading_files: dict[str, frozenset[str]] | None = None

    def __post_init__(self) -> None:
        if not self.document_frequency:
            self.document_frequency = Counter(s for f in self.files.values() for s in f.stems)

    def idf(self, word_stem: str) -> float:
        """The BM25 (Robertson-Spärck Jones) inverse document frequency ``ln(1 + (N - df + 0.5) / (df + 0.5))``
        of a stem over the corpus's N files: always above 0, highest for a word no file holds."""
        n, df = len(self.files), self.document_frequency.get(word_stem, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def heading_files(self, text: str) -> frozenset[str]:
        """The sources holding a heading equal to ``text`` after :func:`normalise_text`."""
        if self._heading_files is None:
            index: dict[str, set[str]] = {}
            for f in self.files.values():
                for heading in f.headings:
                    index.setdefault(normalise_text(heading), set()).add(f.source)
            self._heading_files = {k: frozenset(v) for k, v in index.items()}
        return self._heading_files.get(normalise_text(text), frozenset())

    def counts(self, attribute: str) -> Counter[str]:
        """Files per value of ``attribute`` (``folder``, ``subfolder``, ``format`` or ``language``)."""
        return Counter(getattr(f, attribute) for f in self.files.values())

    def outline(self, subfolders: int = 6) -> str:
        """The corpus's outline as text for the query-writing agent's first turn: files per top-level
        folder (with its largest ``subfolders``), per format and per language, each with its share."""
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
    """Profile every corpus file under ``root`` (see the module docstring). Unreadable, binary and
    empty files are left out, as the indexer skips them. Raises NotADirectoryError for a missing root."""
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
