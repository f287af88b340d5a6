"""The bm25s library (Lù 2024, "BM25S: Orders of magnitude faster lexical search via eager sparse scoring")
as an external search command, for judging a search judge-runner does not run itself.

    python tests/support/engines/bm25s_search.py --corpus fixtures/ [--index-dir DIR] [--limit 10] [--with-text] [QUERY]

The corpus is a folder (every text file not under a hidden folder is one document, id = its path
relative to the folder) or a BEIR ``corpus.jsonl`` (id = ``_id``, text = title + text). The query is
the last argument, else stdin. Prints ``{"results": [{"id", "score"[, "text"]}]}`` best first, results
with a zero score left out. ``--index-dir`` saves the index on the first call and loads it after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bm25s

TEXT_SUFFIXES = {".md", ".txt", ".rst", ".yaml", ".yml", ".json", ".py", ".toml", ".ini", ".cfg", ".csv", ".html", ".sh", ".sql"}


def load_corpus(path: Path) -> tuple[list[str], list[str]]:
    """``(ids, texts)`` of a folder or a BEIR corpus.jsonl."""
    ids, texts = [], []
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = file.relative_to(path)
            if any(part.startswith(".") for part in rel.parts) or file.suffix.lower() not in TEXT_SUFFIXES:
                continue
            ids.append(rel.as_posix())
            texts.append(f"{rel.as_posix()}\n" + file.read_text(encoding="utf-8", errors="replace"))
    else:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    ids.append(str(record["_id"]))
                    texts.append(f"{record.get('title') or ''}\n{record.get('text') or ''}")
    return ids, texts


class Engine:
    """A bm25s index over a corpus: ``search(query, limit) -> [(id, score, text)]``, best first."""

    def __init__(self, corpus: Path, index_dir: Path | None = None):
        self.ids, self.texts = load_corpus(corpus)
        if index_dir is not None and (index_dir / "params.index.json").is_file():
            self.retriever = bm25s.BM25.load(str(index_dir), show_progress=False)
            return
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(self.texts, stopwords="en", show_progress=False), show_progress=False)
        if index_dir is not None:
            index_dir.mkdir(parents=True, exist_ok=True)
            self.retriever.save(str(index_dir), show_progress=False)

    def search(self, query: str, limit: int) -> list[tuple[str, float, str]]:
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.ids[0]:  # only stopwords or punctuation
            return []
        docs, scores = self.retriever.retrieve(tokens, k=min(limit, len(self.ids)), show_progress=False)
        return [(self.ids[int(d)], float(s), self.texts[int(d)]) for d, s in zip(docs[0], scores[0]) if s > 0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--with-text", action="store_true")
    parser.add_argument("query", nargs="?")
    args = parser.parse_args()
    query = args.query if args.query is not None else sys.stdin.read()
    engine = Engine(args.corpus, args.index_dir)
    results = [{"id": i, "score": round(s, 6), **({"text": t} if args.with_text else {})} for i, s, t in engine.search(query, args.limit)]
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
