"""A labelling session of ``judge-runner label``: the journal, the qrels it makes, and where the person is.

Files, in the labels folder (default ``labels/``), for the human qrels set ``NAME``:

- ``NAME.journal.jsonl``: the record. First a ``plan`` line (the sampled items with what they show, the
  sampling, seed, runs, labeller and time), then one line per act: ``label`` (item, qid, docid, grade 0-3,
  labeller, UTC time, seconds spent), ``skip`` and ``undo``. Each line is one write, flushed and fsynced
  before the page is answered, so closing the tab, Ctrl+C or a crash loses nothing; running ``label`` again
  replays the journal and resumes where it stopped. A torn last line (a crash mid-write) is ignored.
- ``NAME.qrels``: the labels given, as TREC qrels (``qid 0 docid grade``, ids %-escaped), in the order
  they were given (a label undone is gone; given again, it is where it was given again). Rewritten after
  every act (a temporary file, fsynced, renamed), so it is always whole.
- the judgment cache: the qrels imported as the human qrels set ``NAME`` after every act, exactly as
  ``judge-runner qrels import`` does (:func:`judge_runner.judging.qrels.import_human_qrels`), so the next
  ``evaluate`` uses them and ``calibrate --human-qrels NAME`` finds them.

What comes next: the first item in the plan's order neither labelled nor skipped; after them the skipped
ones again; right after an undo, the item undone. Thread-safe (one lock): the page's requests come from
the server's threads.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_runner.core.failures import UsageError
from judge_runner.judging.label_plan import Item
from judge_runner.judging.qrels import QRELS_NAME_RE
from judge_runner.search.trec import encode_id

JOURNAL_VERSION = 1
SCALE = {
    0: ("Irrelevant", "Nothing to do with this need, even if it shares words with the query."),
    1: ("Related", "On the topic, but it does not answer: you would not be done after reading it."),
    2: ("Highly relevant", "Answers the need, but partly, a bit unclearly, or buried among other material."),
    3: ("Perfectly relevant", "Dedicated to the need and holds the exact answer."),
}
"""The 0-3 scale in plain words: the TREC/UMBRELA grades as the judge is told them (prompts/judge_label_system.md)."""


def utc_now() -> str:
    """Current UTC time, ISO 8601 with milliseconds and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass
class SessionState:
    """Where a session is, replayed from its journal: ``labels`` ``{item: grade}`` in the order given,
    ``stack`` (items labelled, for undo), ``skipped`` (in the order skipped), ``front`` (the item just
    undone), ``seconds`` per label given (for the page's pace)."""

    labels: dict[str, int] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    front: str | None = None
    seconds: list[float] = field(default_factory=list)

    def apply(self, event: dict[str, Any]) -> None:
        """Apply one journal act (``label``, ``skip``, ``undo``); other lines are ignored."""
        item = str(event.get("item"))
        kind = event.get("type")
        if kind == "label":
            self.labels.pop(item, None)
            self.labels[item] = int(event["grade"])
            self.stack.append(item)
            if item in self.skipped:
                self.skipped.remove(item)
            self.front = None if self.front == item else self.front
            if isinstance(event.get("seconds"), (int, float)):
                self.seconds.append(float(event["seconds"]))
        elif kind == "undo" and item in self.labels:
            del self.labels[item]
            if item in self.stack:
                self.stack.reverse()
                self.stack.remove(item)
                self.stack.reverse()
            self.front = item
        elif kind == "skip":
            if item in self.skipped:
                self.skipped.remove(item)
            self.skipped.append(item)
            self.front = None if self.front == item else self.front


class LabelSession:
    """A session on the set ``name`` in ``folder``: :meth:`start` a new one from a plan, or :meth:`open` the
    one its journal holds. ``importer(qrels_path, count)`` is called after every act (the cache import;
    None: no import)."""

    def __init__(self, folder: Path, name: str, importer: Callable[[Path, int], None] | None = None):
        if not QRELS_NAME_RE.fullmatch(name or ""):
            raise UsageError(f"label set name {name!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        self.folder, self.name, self.importer = Path(folder), name, importer
        self.journal = self.folder / f"{name}.journal.jsonl"
        self.qrels = self.folder / f"{name}.qrels"
        self.plan: dict[str, Any] = {}
        self.items: dict[str, Item] = {}
        self.order: list[str] = []
        self.state = SessionState()
        self._lock = threading.Lock()
        self._shown_at = time.monotonic()

    # -- the journal -----------------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether a journal is there to resume."""
        return self.journal.is_file() and self.journal.stat().st_size > 0

    def _append(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
        with open(self.journal, "a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def start(self, items: list[Item], details: dict[str, Any]) -> None:
        """Begin a new session with ``items`` (``details``: sampling, seed, runs, labeller...). Raises
        UsageError when a journal is already there (resume it instead) or the plan is empty."""
        if self.exists():
            raise UsageError(f"{self.journal} already holds a session: run `judge-runner label --name {self.name}` to resume it")
        if not items:
            raise UsageError("nothing to label: the runs hold no scored query with results")
        self.folder.mkdir(parents=True, exist_ok=True)
        plan = {"type": "plan", "version": JOURNAL_VERSION, "name": self.name, "createdAt": utc_now(), **details}
        plan["items"] = [item.shown() for item in items]
        self._append(plan)
        _fsync_dir(self.folder)
        self._load(plan, [])
        self._write_qrels()

    def open(self) -> None:
        """Replay the journal. Raises UsageError when it is missing or its first line is not a plan."""
        if not self.exists():
            raise UsageError(f"no labelling session {self.name!r} in {self.folder}: give the run files to sample from")
        lines: list[dict[str, Any]] = []
        for raw in self.journal.read_text(encoding="utf-8").split("\n"):
            if not raw.strip():
                continue
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError:
                continue  # a torn last line: the act was never answered
        if not lines or lines[0].get("type") != "plan":
            raise UsageError(f"{self.journal} does not start with a plan line: not a judge-runner label journal")
        self._load(lines[0], lines[1:])
        self._write_qrels()

    def _load(self, plan: dict[str, Any], events: list[dict[str, Any]]) -> None:
        self.plan = plan
        self.items = {raw["id"]: Item(**raw) for raw in plan["items"]}
        self.order = [raw["id"] for raw in plan["items"]]
        self.state = SessionState()
        for event in events:
            if str(event.get("item")) in self.items:
                self.state.apply(event)
        self._shown_at = time.monotonic()

    def _write_qrels(self) -> None:
        lines = [f"{encode_id(self.items[i].qid)} 0 {encode_id(self.items[i].source)} {g}\n" for i, g in self.state.labels.items()]
        tmp = self.qrels.with_name(self.qrels.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write("".join(lines))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(self.qrels)
        _fsync_dir(self.folder)
        if self.importer is not None:
            self.importer(self.qrels, len(lines))

    # -- acts ------------------------------------------------------------------------------------------

    def current(self) -> Item | None:
        """The item to show now (None when every item is labelled)."""
        s = self.state
        if s.front is not None and s.front not in s.labels:
            return self.items[s.front]
        for item in self.order:
            if item not in s.labels and item not in s.skipped:
                return self.items[item]
        for item in s.skipped:
            if item not in s.labels:
                return self.items[item]
        return None

    def act(self, kind: str, item: str | None, labeller: str, grade: int | None = None) -> None:
        """Record one act and make it durable: ``label`` (``grade`` 0-3) or ``skip`` of the current item
        ``item``, or ``undo`` of the last label. Raises ValueError for an unknown act, a grade outside 0-3,
        an item that is not the current one (a stale page), or an undo with nothing to undo."""
        with self._lock:
            now = time.monotonic()
            current = self.current()
            line: dict[str, Any] = {"type": kind, "labeller": labeller, "at": utc_now()}
            if kind in ("label", "skip"):
                if current is None or item != current.id:
                    raise ValueError("that item is not the one to label now (the page is stale: reload it)")
                line.update(item=current.id, qid=current.qid, docid=current.source)
                if kind == "label":
                    if not isinstance(grade, int) or isinstance(grade, bool) or grade not in SCALE:
                        raise ValueError("a label is an integer 0-3")
                    line.update(grade=grade, seconds=round(now - self._shown_at, 3))
            elif kind == "undo":
                if not self.state.stack:
                    raise ValueError("nothing to undo")
                last = self.items[self.state.stack[-1]]
                line.update(item=last.id, qid=last.qid, docid=last.source)
            else:
                raise ValueError(f"unknown act {kind!r}")
            self._append(line)
            self.state.apply(line)
            self._write_qrels()
            self._shown_at = now

    def view(self) -> dict[str, Any]:
        """What the page shows (JSON-ready): the current item (:meth:`Item.shown`) with its place in its
        query, progress, pace and the scale. Nothing of the judge's is in it."""
        with self._lock:
            s = self.state
            item = self.current()
            total = len(self.order)
            place = None
            if item is not None:
                of_query = [i for i in self.order if self.items[i].qid == item.qid]
                queries = list(dict.fromkeys(self.items[i].qid for i in self.order))
                place = {
                    "query": queries.index(item.qid) + 1,
                    "queries": len(queries),
                    "document": of_query.index(item.id) + 1,
                    "documents": len(of_query),
                }
            pace = sorted(s.seconds)[len(s.seconds) // 2] if s.seconds else None
            left = total - len(s.labels)
            return {
                "name": self.name,
                "item": item.shown() if item is not None else None,
                "place": place,
                "progress": {
                    "labelled": len(s.labels),
                    "total": total,
                    "skipped": sum(1 for i in s.skipped if i not in s.labels),
                    "secondsPerLabel": pace,
                    "secondsLeft": None if pace is None else round(pace * left),
                },
                "canUndo": bool(s.stack),
                "done": item is None,
                "scale": [{"grade": g, "name": n, "meaning": m} for g, (n, m) in SCALE.items()],
                "qrelsFile": str(self.qrels),
                "imported": self.importer is not None,
                "sampling": self.plan.get("sampling"),
                "recommended": self.plan.get("recommended"),
            }
