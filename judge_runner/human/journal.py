"""A labelling session of ``judge-runner label``: its journal, the qrels it makes, and where the person is
(docs/calibration.md). ``NAME.journal.jsonl`` holds a ``plan`` line, then one line per act, each fsynced before
the page is answered, so nothing is lost and a rerun resumes; a torn last line is ignored. ``NAME.qrels`` holds
exactly the grades given, in order: each act changes only its own line (an undo under a later line blanks it),
so the 3,000th act costs what the first did, and the file is rewritten whole when the session opens and closes.
After every act the sink (the judgment cache) gets the pair that changed. An undo takes back the last grade of
the tab that asks, never another tab's. Thread-safe (one lock)."""

from __future__ import annotations

import bisect
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from judge_runner.core.failures import UsageError
from judge_runner.human.plan import Item
from judge_runner.judging.qrels import QRELS_NAME_RE
from judge_runner.judging.rubric import load_rubric
from judge_runner.search.trec import encode_id

JOURNAL_VERSION = 1
SCALE = load_rubric().scale()
"""The 0-3 scale ``{grade: (name, meaning)}`` in the rubric's words (``prompts/judge_rubric.md``)."""

FAST_LABEL_S = 1.0
"""Seconds: a grade given sooner after its document was shown is flagged ``fast``, never refused. About the
least time to read a heading and first words (some 10 words at 600 a minute: Rayner et al. 2016, Psychological
Science in the Public Interest 17(1)) and pick one of four keys (0.5 s: Hick 1952, Q. J. Exp. Psychol. 4(1)); a
held or doubled key falls far below it."""


class StaleAct(ValueError):
    """An act that does not fit the session now (the item is not current, or the tab has nothing to undo); the
    page gets the state back."""


class LabelSink(Protocol):
    """Where a session's qrels go after every act: :meth:`changed` with the file, its number of grades and the
    pairs that changed (a value None: taken back; ``pairs`` None: take the whole file)."""

    def changed(self, qrels: Path, count: int, pairs: Mapping[tuple[str, str], int | None] | None = None) -> None: ...

    def status(self) -> dict[str, Any]: ...


def utc_now() -> str:
    """ISO 8601 with milliseconds and ``Z``."""
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
    """Where a session is, replayed from its journal: ``labels`` ``{item: grade}`` in order, ``stack`` for undo,
    ``by`` the tab of each grade, ``skipped`` in order, ``front`` the item just undone. Each act costs O(1)."""

    labels: dict[str, int] = field(default_factory=dict)
    stack: dict[str, None] = field(default_factory=dict)
    by: dict[str, str | None] = field(default_factory=dict)
    fast: set[str] = field(default_factory=set)
    skipped: dict[str, None] = field(default_factory=dict)
    front: str | None = None
    seconds: list[float] = field(default_factory=list)
    sorted_seconds: list[float] = field(default_factory=list)
    per_tab: dict[str | None, dict[str, None]] = field(default_factory=dict)
    """Each tab's standing grades in order: what its undo takes back."""

    def apply(self, event: dict[str, Any]) -> None:
        """Apply one journal act; lines other than ``label``, ``skip``, ``undo`` are ignored."""
        item = str(event.get("item"))
        kind = event.get("type")
        if kind == "label":
            self.labels.pop(item, None)
            self.labels[item] = int(event["grade"])
            self.stack.pop(item, None)
            self.stack[item] = None
            if item in self.by:
                self.per_tab.get(self.by[item], {}).pop(item, None)
            self.by[item] = event.get("tab")
            self.per_tab.setdefault(event.get("tab"), {})[item] = None
            if event.get("fast"):
                self.fast.add(item)
            else:
                self.fast.discard(item)
            self.skipped.pop(item, None)
            self.front = None if self.front == item else self.front
            if isinstance(event.get("seconds"), (int, float)):
                self.seconds.append(float(event["seconds"]))
                bisect.insort(self.sorted_seconds, float(event["seconds"]))
        elif kind == "undo" and item in self.labels:
            del self.labels[item]
            self.stack.pop(item, None)
            if item in self.by:
                self.per_tab.get(self.by.pop(item), {}).pop(item, None)
            self.fast.discard(item)
            self.front = item
        elif kind == "skip":
            self.skipped.pop(item, None)
            self.skipped[item] = None
            self.front = None if self.front == item else self.front

    def last_of(self, tab: str | None) -> str | None:
        labels = self.per_tab.get(tab)
        return next(reversed(labels)) if labels else None


class LabelSession:
    """A session on the set ``name`` in ``folder``: :meth:`start` a new one or :meth:`open` the journal's.
    ``sink`` is told after every act; ``clock`` (monotonic seconds) times each grade."""

    def __init__(
        self,
        folder: Path,
        name: str,
        sink: LabelSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        fast_floor_s: float = FAST_LABEL_S,
    ):
        if not QRELS_NAME_RE.fullmatch(name or ""):
            raise UsageError(f"label set name {name!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        self.folder, self.name, self.sink = Path(folder), name, sink
        self.clock, self.fast_floor_s = clock, fast_floor_s
        self.journal = self.folder / f"{name}.journal.jsonl"
        self.qrels = self.folder / f"{name}.qrels"
        self.plan: dict[str, Any] = {}
        self.items: dict[str, Item] = {}
        self.order: list[str] = []
        self.state = SessionState()
        self.closed = False
        self._lock = threading.Lock()
        self._loaded_at = clock()
        self._shown_at: dict[str | None, float] = {}
        self._torn = False  # the journal does not end with a newline (a crash, a failed write): the next line starts one
        self._cursor = 0  # every item of the plan's order before it is labelled or skipped
        self._position: dict[str, int] = {}  # item -> its place in the plan's order
        self._places: dict[str, dict[str, int]] = {}  # item -> what _place says of it
        self._rows: dict[str, tuple[int, int]] = {}  # item -> (offset, length) of its line in the qrels file
        self._size = 0  # bytes of the qrels file
        self._holes = False  # the qrels file holds a blanked line: written whole again at close
        self._qrels_ok = False  # the qrels file is exactly the labels given (False after a failed write: written whole next)

    # -- the journal -----------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.journal.is_file() and self.journal.stat().st_size > 0

    def _append(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
        try:
            with open(self.journal, "a", encoding="utf-8") as handle:
                handle.write(("\n" if self._torn else "") + text)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            self._torn = True  # part of the line may be there
            raise
        self._torn = False

    def start(self, items: list[Item], details: dict[str, Any]) -> None:
        """Begin a new session with ``items``. Raises UsageError when a journal is already there or the plan is
        empty."""
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
        """Replay the journal. Raises UsageError when it is missing or does not start with a plan."""
        if not self.exists():
            raise UsageError(f"no labelling session {self.name!r} in {self.folder}: give the run files to sample from")
        text = self.journal.read_text(encoding="utf-8")
        lines: list[dict[str, Any]] = []
        for raw in text.split("\n"):
            if not raw.strip():
                continue
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError:
                continue  # a torn line: the act was never answered
        if not lines or lines[0].get("type") != "plan":
            raise UsageError(f"{self.journal} does not start with a plan line: not a judge-runner label journal")
        self._torn = not text.endswith("\n")
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
        self._loaded_at = self.clock()
        self._shown_at = {}
        self._cursor = 0
        self._position = {item: n for n, item in enumerate(self.order)}
        queries: dict[str, list[str]] = {}
        for item in self.order:
            queries.setdefault(self.items[item].qid, []).append(item)
        self._places = {
            item: {"query": q + 1, "queries": len(queries), "document": d + 1, "documents": len(of_query)}
            for q, of_query in enumerate(queries.values())
            for d, item in enumerate(of_query)
        }

    def _qrels_line(self, item: str) -> bytes:
        found = self.items[item]
        return f"{encode_id(found.qid)} 0 {encode_id(found.source)} {self.state.labels[item]}\n".encode()

    def _write_qrels(self, tell: bool = True) -> None:
        """Write the qrels file whole (temporary file, fsynced, renamed); ``tell``: the sink takes all of it."""
        self._qrels_ok = False
        rows, lines, size = {}, [], 0
        for item in self.state.labels:
            line = self._qrels_line(item)
            rows[item] = (size, len(line))
            lines.append(line)
            size += len(line)
        tmp = self.qrels.with_name(self.qrels.name + ".tmp")
        with open(tmp, "wb") as handle:
            handle.write(b"".join(lines))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(self.qrels)
        _fsync_dir(self.folder)
        self._rows, self._size, self._holes, self._qrels_ok = rows, size, False, True
        if self.sink is not None and tell:
            self.sink.changed(self.qrels, len(rows))

    def _change_qrels(self, kind: str, item: str) -> None:
        """Bring the qrels file and the sink up to one act: O(1), or the file written whole when it cannot be
        changed in place. Raises OSError when it cannot be written whole either."""
        if kind not in ("label", "undo"):
            return
        if not self._qrels_ok:
            self._write_qrels()
            return
        try:
            self._edit_qrels(kind, item)
        except OSError:
            self._write_qrels()
            return
        if self.sink is not None:
            found = self.items[item]
            self.sink.changed(self.qrels, len(self._rows), {(found.qid, found.source): self.state.labels.get(item)})

    def _edit_qrels(self, kind: str, item: str) -> None:
        self._qrels_ok = False
        with open(self.qrels, "r+b") as handle:
            old = self._rows.pop(item, None)
            if old is not None and old[0] + old[1] == self._size:
                handle.truncate(old[0])
                self._size = old[0]
            elif old is not None:
                handle.seek(old[0])
                handle.write(b" " * (old[1] - 1) + b"\n")
                self._holes = True
            if kind == "label":
                line = self._qrels_line(item)
                handle.seek(self._size)
                handle.write(line)
                self._rows[item] = (self._size, len(line))
                self._size += len(line)
            handle.flush()
            os.fsync(handle.fileno())
        self._qrels_ok = True

    # -- acts ------------------------------------------------------------------------------------------

    def current(self) -> Item | None:
        """The item to show now (None when every item is graded): the first neither graded nor skipped, then the
        skipped ones, right after an undo the item undone."""
        s = self.state
        if s.front is not None and s.front not in s.labels:
            return self.items[s.front]
        while self._cursor < len(self.order) and (self.order[self._cursor] in s.labels or self.order[self._cursor] in s.skipped):
            self._cursor += 1
        if self._cursor < len(self.order):
            return self.items[self.order[self._cursor]]
        for item in s.skipped:
            if item not in s.labels:
                return self.items[item]
        return None

    def act(self, kind: str, item: str | None, labeller: str, grade: int | None = None, *, tab: str | None = None) -> None:
        """Record one act of ``tab`` durably: ``label`` (``grade`` 0-3) or ``skip`` of the current ``item``, or
        ``undo`` of the tab's last grade. Raises :class:`StaleAct` for a stale act or a closing session,
        ValueError for an unknown act or grade, OSError when the journal cannot be written (the act is then not
        made)."""
        with self._lock:
            if self.closed:
                raise StaleAct("the labelling server is stopping: this act was not saved")
            now = self.clock()
            line = self._line(kind, item, labeller, grade, tab, now)
            self._append(line)
            self.state.apply(line)
            if kind == "undo":  # the item undone is before the cursor, unlabelled again
                self._cursor = min(self._cursor, self._position[line["item"]])
            self._change_qrels(kind, line["item"])
            self._shown_at[tab] = now

    def _line(self, kind: str, item: str | None, labeller: str, grade: int | None, tab: str | None, now: float) -> dict[str, Any]:
        """The journal line of an act, checked against the state."""
        line: dict[str, Any] = {"type": kind, "labeller": labeller, "tab": tab, "at": utc_now()}
        if kind in ("label", "skip"):
            current = self.current()
            if current is None or item != current.id:
                raise StaleAct("that item is not the one to label now (another tab was quicker, or the page is stale: reload it)")
            line.update(item=current.id, qid=current.qid, docid=current.source)
            if kind == "label":
                if not isinstance(grade, int) or isinstance(grade, bool) or grade not in SCALE:
                    raise ValueError("a label is an integer 0-3")
                seconds = round(now - self._shown_at.get(tab, self._loaded_at), 3)
                line.update(grade=grade, seconds=seconds, fast=seconds < self.fast_floor_s)
        elif kind == "undo":
            last = self.state.last_of(tab)
            if last is None:
                raise StaleAct("this tab has no label of its own to undo (labels given in other tabs, or before it was opened, are theirs)")
            undone = self.items[last]
            line.update(item=undone.id, qid=undone.qid, docid=undone.source)
        else:
            raise ValueError(f"unknown act {kind!r}")
        return line

    def close(self) -> None:
        """Refuse further acts; the qrels file is written whole if an undo left a blank line in it."""
        with self._lock:
            self.closed = True
            if self.plan and (self._holes or not self._qrels_ok):
                try:
                    self._write_qrels(tell=False)
                except OSError:
                    pass  # the journal holds every act: the next `label --name` writes the file again

    def view(self, tab: str | None = None) -> dict[str, Any]:
        """What the page shows (JSON-ready), nothing of the judge's labels in it. A view for a ``tab`` marks the
        item as shown to it, which starts the grade's clock."""
        with self._lock:
            if tab is not None:
                self._shown_at[tab] = self.clock()
            s = self.state
            item = self.current()
            total = len(self.order)
            pace = s.sorted_seconds[len(s.sorted_seconds) // 2] if s.sorted_seconds else None
            left = total - len(s.labels)
            return {
                "name": self.name,
                "item": item.shown() if item is not None else None,
                "place": self._place(item),
                "progress": {
                    "labelled": len(s.labels),
                    "total": total,
                    "skipped": sum(1 for i in s.skipped if i not in s.labels),
                    "secondsPerLabel": pace,
                    "secondsLeft": None if pace is None else round(pace * left),
                    "fast": len(s.fast),
                    "fastFloorSeconds": self.fast_floor_s,
                },
                "canUndo": s.last_of(tab) is not None,
                "done": item is None,
                "scale": [{"grade": g, "name": n, "meaning": m} for g, (n, m) in SCALE.items()],
                "rubric": load_rubric().as_dict(),
                "qrelsFile": str(self.qrels),
                "journalFile": str(self.journal),
                "cache": self.sink.status() if self.sink is not None else {"state": "off", "message": "", "path": None},
                "sampling": self.plan.get("sampling"),
                "recommended": self.plan.get("recommended"),
            }

    def _place(self, item: Item | None) -> dict[str, int] | None:
        """``item``'s query number in the plan and its number among the query's documents."""
        return dict(self._places[item.id]) if item is not None else None
