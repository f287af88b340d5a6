"""The passage audit by hand: by query type, how often the text the judge is shown of a query's expected source
holds its best-matching chunk (docs/judge-protocol.md), on fixtures/ and ../shared/data/fixtures-kb, for the
offline writer's queries and the hand-written set (tests/data/passage_audit.jsonl). Deterministic.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/passage_audit.py [--embedder torch] [--fixtures 15] [--kb 30]

Prints one table per corpus and set: the rule (query and intent, words and meaning) and, beside it, the same
rule given the query's words alone (what the judge was shown before the intent and the embedder counted).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judge_runner.embed.registry import instance  # noqa: E402
from judge_runner.search.passages import select_passages  # noqa: E402
from tests.support.passage_audit import CORPORA, audit, generated, hand_written, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="torch", help="the embedder kind the passages are chosen under")
    parser.add_argument("--fixtures", type=int, default=15, help="offline writer's queries on fixtures/")
    parser.add_argument("--kb", type=int, default=30, help="offline writer's queries on fixtures-kb")
    args = parser.parse_args()
    embedder = instance(args.embedder)
    rules = {
        f"query and intent, under {embedder.name}": lambda q, i, ch: select_passages(q, ch, intent=i, embedder=embedder),
        "the query's words alone": lambda q, i, ch: select_passages(q, ch),
    }
    written = hand_written()
    for corpus, count in (("fixtures", args.fixtures), ("fixtures-kb", args.kb)):
        if not CORPORA[corpus].is_dir():
            print(f"{corpus}: not here ({CORPORA[corpus]})")
            continue
        sets = {f"offline writer ({count})": generated(corpus, count), "hand-written": [c for c in written if c.corpus == corpus]}
        for name, cases in sets.items():
            for rule_name, rule in rules.items():
                print(f"## {corpus}, {name}: {rule_name}\n{table(audit(cases, rule))}\n")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    main()
