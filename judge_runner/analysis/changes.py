"""What differs between two runs: which columns they can be compared on, the cause of a change named for
what it is, and the failed queries each side of a comparison carries."""

from __future__ import annotations

from typing import Any, Protocol

from judge_runner.core.models import DIMENSIONS
from judge_runner.evaluation.state import over_failed_share
from judge_runner.measures.failed import Failed, failed_of
from judge_runner.measures.ir import NDCG10_NAME
from judge_runner.runs.lines import Provenance
from judge_runner.runs.read import RunLines, RunRecords

GATED = ("overall", NDCG10_NAME)  # what --fail-on-regression watches
SCORE_COLUMNS = (*DIMENSIONS, "overall")  # computed from labels under a scoring version
SYSTEM_CHANGE = "system under test: "  # what_changed's words for another search judged


class RunLike(Protocol):
    """What these functions read of a run."""

    @property
    def file(self) -> RunRecords: ...

    @property
    def provenance(self) -> Provenance: ...

    @property
    def shown_system(self) -> str | None: ...

    @property
    def judge_label(self) -> str: ...

    @property
    def scoring_version(self) -> int: ...

    @property
    def systems(self) -> list[str]: ...


def comparable_columns(old: RunLike, new: RunLike, columns: tuple[str, ...] = GATED) -> tuple[str, ...]:
    """All of ``columns`` under the same scoring version, else only the IR metrics, which do not depend on how
    labels become scores: a change of the scoring rules is not a regression."""
    if old.scoring_version == new.scoring_version:
        return columns
    return tuple(c for c in columns if c not in SCORE_COLUMNS)


def failed_side(run: RunLike, name: str, other: RunLike | None = None) -> Failed:
    """The failed queries of the system ``run`` shows, called ``name`` (:mod:`judge_runner.measures.failed`)."""
    shown = run.shown_system
    types = {e.queryId: e.queryType for e in [*(other.file.evaluations if other is not None else []), *run.file.evaluations]}
    errors = [e.line() for e in run.file.errors if shown is None or e.system == shown]
    return failed_of(name, errors, sum(1 for e in run.file.evaluations if shown is None or e.system == shown), types)


def failure_counts(file: RunLines) -> dict[str | None, tuple[int, int]]:
    """``{system: (failed, queries)}`` of a run file (None: a run's one unnamed search)."""
    counts: dict[str | None, tuple[int, int]] = {}
    for system, failed in [*((e.system, 0) for e in file.evaluations), *((e.system, 1) for e in file.errors)]:
        done, of = counts.get(system, (0, 0))
        counts[system] = (done + failed, of + 1)
    return counts


def failure_words(file: RunLines) -> str:
    """Which systems failed the failure gate, with a first error:
    ``command:b: 5 of 14 queries failed (first: search_failed: ...)``; "no query was judged" when none did."""
    over = over_failed_share(failure_counts(file))
    text = "; ".join(f"{f'{s}: ' if s else ''}{f} of {n} queries failed" for s, (f, n) in over.items()) or "no query was judged"
    first = next((e for e in file.errors if e.system in over), None)
    return text + (f" (first: {first.errorType}: {first.message[:120]})" if first is not None else "")


def system_under_test(run: RunLike) -> str:
    """The search a run judged, in words (``command ...``, ``HTTP ...``, ``built-in hybrid search``), with its
    limit when the config gives it."""
    config = (run.file.run_start.config if run.file.run_start is not None else None) or {}
    entries = [e for e in (getattr(run.provenance, "searchSystems", None) or []) if isinstance(e, dict)]
    entry = next((e for e in entries if e.get("name") == run.shown_system), entries[0] if len(entries) == 1 else None)
    if entry is None:
        text = f"built-in {config.get('searchMode') or 'hybrid'} search"
    else:
        kind = entry.get("kind")
        text = {
            "command": f"command {entry.get('command')}",
            "http": f"HTTP {entry.get('url')}",
            "trec-run": f"TREC run {entry.get('run')}",
            "python": f"Python function {entry.get('function')}",
        }.get(
            str(kind),
            f"built-in {entry.get('mode') or config.get('searchMode') or 'hybrid'} search"
            + (f" ({entry['config']})" if entry.get("config") else ""),
        )
    return text + (f", limit {config['searchLimit']}" if config.get("searchLimit") else "")


def lineup_change(old: RunLike, new: RunLike) -> bool:
    """Whether the two runs show different systems because a compare run's line-up put another one first (no
    search changed: never a regression); a search reconfigured between two runs of one system is not this."""
    return bool(old.systems or new.systems) and system_under_test(old) != system_under_test(new)


def _search_config(run: RunLike) -> dict[str, Any] | None:
    """The built-in search's settings, None when the run judged another system."""
    entries = [e for e in (getattr(run.provenance, "searchSystems", None) or []) if isinstance(e, dict)]
    entry = next((e for e in entries if e.get("name") == run.shown_system), entries[0] if len(entries) == 1 else None)
    if entry is None:
        return run.provenance.searchConfig
    return entry.get("searchConfig") if entry.get("kind") == "builtin" else None


def what_changed(old: RunLike, new: RunLike) -> list[str]:
    """What differs between two runs that can explain a delta: the system under test or its settings, the
    corpus (when both indexed one), the query set, the judge, the scoring version, the judge-runner version."""
    changes = []
    po, pn = old.provenance, new.provenance
    was, now = system_under_test(old), system_under_test(new)
    old_config, new_config = _search_config(old), _search_config(new)
    if was != now:
        changes.append(f"{SYSTEM_CHANGE}{was} -> {now}")
    elif old_config is not None and new_config is not None and old_config != new_config:
        keys = sorted(k for k in set(old_config) | set(new_config) if old_config.get(k) != new_config.get(k))
        changes.append("search config: " + ", ".join(f"{k} {old_config.get(k)} -> {new_config.get(k)}" for k in keys))
    if po.corpusFingerprint and pn.corpusFingerprint and po.corpusFingerprint != pn.corpusFingerprint:
        changes.append("corpus changed")
    if po.querySetSha256 != pn.querySetSha256:
        written = (
            f"; written by {po.generatorModel}, then {pn.generatorModel}"
            if po.generatorModel and pn.generatorModel and po.generatorModel != pn.generatorModel
            else ""
        )
        changes.append(f"different query set (unpaired comparison{written})")
    if old.judge_label != new.judge_label:
        changes.append(f"judge {old.judge_label} -> {new.judge_label}")
    if old.scoring_version != new.scoring_version:
        changes.append(f"scoring version {old.scoring_version} -> {new.scoring_version}: scores not compared, IR metrics are")
    if po.judgeRunnerVersion != pn.judgeRunnerVersion:
        changes.append(f"judge-runner {po.judgeRunnerVersion} -> {pn.judgeRunnerVersion}")
    return changes
