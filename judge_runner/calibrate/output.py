"""Calibration files (``calibration/<time id>.json``, checked against ``schemas/calibration.schema.json``):
writing them, finding the latest for a judge, and the console table."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

from judge_runner.calibrate.verdicts import PEOPLE_CHECKS, status_of
from judge_runner.core.ids import sort_key, time_id
from judge_runner.core.resources import load_schema
from judge_runner.judging.fingerprint import comparability_key, legacy_key

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

DEFAULT_FOLDER = Path("calibration")


def schema_problems(document: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a document against its schema (empty when valid)."""
    validator = jsonschema.Draft202012Validator(load_schema("calibration.schema.json"))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(document)][:20]


def default_path(folder: Path = DEFAULT_FOLDER, now: datetime | None = None) -> Path:
    """``folder/<time id>.json``, a new suffix drawn while the name is taken."""
    while True:
        path = folder / f"{time_id(now)}.json"
        if not path.exists():
            return path


def write_calibration(document: Mapping[str, Any], path: Path) -> Path:
    """Validate and write ``document`` atomically (a temporary file of its own, renamed). Raises ValueError
    listing schema problems."""
    problems = schema_problems(document)
    if problems:
        raise ValueError("calibration document does not match its schema: " + "; ".join(problems))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")  # created exclusively, with the umask's mode
    try:
        with open(tmp, "x", encoding="utf-8") as handle:
            handle.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def created_at(document: Mapping[str, Any]) -> datetime:
    """A calibration's ``createdAt`` as a time (a missing one is the earliest): ``09:00:00Z`` sorts before
    ``09:00:00.500Z``, which string order gets wrong."""
    try:
        moment = datetime.fromisoformat(str(document.get("createdAt", "")))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _key(fingerprint: str | Mapping[str, Any]) -> str:
    return fingerprint if isinstance(fingerprint, str) else comparability_key(fingerprint)


def latest_calibration(folder: Path | str, fingerprint: str | Mapping[str, Any]) -> dict | None:
    """The newest calibration in ``folder`` whose judge matches ``fingerprint`` (a fingerprint dict, compared by
    its comparability key, or a key string, also matched against a format-1 ``legacyKey``). Unreadable files are
    skipped; None when nothing matches."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    key = _key(fingerprint)
    best: dict | None = None
    best_key: tuple[datetime, str] | None = None
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("type") != "calibration":
            continue
        judge = data.get("judge") or {}
        if key not in (judge.get("fingerprintKey"), judge.get("legacyKey")):
            continue
        order = (created_at(data), sort_key(path.stem))  # the same createdAt: the later file name
        if best_key is None or order > best_key:
            best, best_key = data, order
    return best


def _missing(verdict: Mapping[str, Any]) -> list[str]:
    """The checks without evidence, those against the people first."""
    checks = verdict.get("checks", {})
    missing = verdict.get("missing")
    names = list(missing) if isinstance(missing, Mapping) else [n for n, c in checks.items() if c.get("status") in ("n/a", "insufficient")]
    return sorted(
        names,
        key=lambda n: (PEOPLE_CHECKS.index(n) if n in PEOPLE_CHECKS else len(PEOPLE_CHECKS), list(checks).index(n) if n in checks else 0),
    )


def _open(name: str, check: Mapping[str, Any]) -> str:
    needed, gap = check.get("queriesToDecide"), check.get("gapToThreshold")
    if needed:
        unit = "probe queries" if str(check.get("unit", "")).startswith("probe") else str(check.get("unit") or "labelled queries")
        return f"{name} (about {needed} {unit} would decide it)"
    return f"{name} ({gap:.4f} from its threshold: more are unlikely to decide it)" if gap is not None else name


def verdict_summary(verdict: Mapping[str, Any], status: str | None = None) -> str:
    """What a verdict rests on, in one line: failed checks, inconclusive ones and what would decide each, and
    the checks without evidence."""
    status = status or str(verdict.get("status"))
    checks = verdict.get("checks", {})
    parts = []
    failed = [n for n, c in checks.items() if c.get("status") == "fail"]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    inconclusive = [_open(n, c) for n, c in checks.items() if c.get("status") == "inconclusive"]
    if inconclusive:
        parts.append("inconclusive: " + ", ".join(inconclusive))
    missing = _missing(verdict)
    if missing and status == "insufficient":
        parts.append("not enough evidence: " + ", ".join(missing))
    elif missing:
        parts.append("not enough evidence for " + ", ".join(missing))
    return "; ".join(parts)


def calibration_line(calibration: Mapping[str, Any] | None) -> str:
    """One line for trend and report: ``judge calibration: calibrated (2026-11-30, kappa(>=2) 0.61, tau 0.93)``,
    or failed, inconclusive, insufficient, uncalibrated; the checks without evidence are always named."""
    status = status_of(dict(calibration) if calibration else None)
    if not calibration:
        return "judge calibration: uncalibrated (run judge-runner calibrate to measure it)"
    verdict = calibration.get("verdict", {})
    checks = verdict.get("checks", {})
    parts = [str(calibration.get("createdAt", ""))[:10]]
    for name, label in (("perPairAgreement", "kappa(>=2)"), ("ranking", "tau")):
        value = checks.get(name, {}).get("value")
        if value is not None and checks[name].get("status") not in ("n/a", "insufficient"):
            parts.append(f"{label} {value:.2f}")
    summary = verdict_summary(verdict, status)
    return f"judge calibration: {status} ({', '.join([*parts, summary] if summary else parts)})"


def _fmt(figure: Mapping[str, Any] | None, percent: bool = False) -> str:
    if not figure or figure.get("value") is None:
        return "n/a"
    scale = 100 if percent else 1
    value = f"{figure['value'] * scale:+.1f}" if percent else f"{figure['value']:.3f}"
    ci = figure.get("ci95")
    if ci:
        value += f" [{ci[0] * scale:.1f}, {ci[1] * scale:.1f}]" if percent else f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return value


AGREEMENT_ROWS = (
    ("pairs", None),
    ("kappa(>=2)", "kappaAt2"),
    ("kappa(>=1)", "kappaAt1"),
    ("kappa 0-3", "kappaUnweighted"),
    ("weighted (quadratic)", "kappaQuadratic"),
    ("P(>=2 | qrels 0)", "overLabelling"),
)
STATUS_COLOURS = {"pass": "green", "ok": "green", "warn": "yellow", "inconclusive": "cyan", "fail": "red", "insufficient": "magenta"}


def _table(title: str, columns: Mapping[str, bool], rows: list[list[str]], styles: Mapping[int, Mapping[str, str]] | None = None) -> Any:
    """A rich table whose figure columns (``columns[name]`` True) never wrap and prose columns wrap at words;
    cells are literal text, never rich markup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for k, (name, figure) in enumerate(columns.items()):
        longest = max([len(name), *(len(row[k]) for row in rows)]) if figure else None
        table.add_column(name, no_wrap=figure, min_width=longest)
    for row in rows:
        table.add_row(*[Text(cell, style=(styles or {}).get(k, {}).get(cell, "")) for k, cell in enumerate(row)])
    return table


def _fit(console: Console, tables: list[Table]) -> None:
    """Widen ``console`` so no cell is cut: on a terminal to each table's minimum, elsewhere to its natural
    width. Never narrower."""
    unbounded = console.options.update_width(10_000)
    sizes = [console.measure(t, options=unbounded) for t in tables]
    needed = max(((m.minimum if console.is_terminal else m.maximum) for m in sizes), default=0)
    console.width = max(console.width, needed)


def _agreement_rows(document: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for mode, figures in document["modes"].items():
        subsets = figures["agreement"]
        for label, key in AGREEMENT_ROWS:
            rows.append([mode, label, *(str(a["pairs"]) if key is None else _fmt(a.get(key)) for a in subsets.values())])
    return rows


def _system_rows(document: Mapping[str, Any]) -> tuple[list[list[str]], bool]:
    rows, labelled = [], False
    for mode, figures in document["modes"].items():
        for name, pair in figures["systems"]["nDCG@10"]["systems"].items():
            share = pair.get("labelledAt10")
            labelled = labelled or "labelledAt10" in pair
            rows.append([mode, name, f"{pair['human']:.3f}", f"{pair['judge']:.3f}", "n/a" if share is None else f"{share:.0%}"])
        rows.append([mode, "Kendall tau_b", "", _fmt(figures["systems"]["nDCG@10"]["kendallTauB"]), ""])
    return rows, labelled


def _probe_rows(probes: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    if "position" in probes:
        p = probes["position"]
        rows.append(["position", "flip rate across positions", _fmt(p["positionFlipRate"])])
        rows.append(["position", "flip rate across trials", _fmt(p["trialFlipRate"])])
        rows.append(["position", "mean label by slot", " ".join(f"{s}:{v:.2f}" for s, v in p["meanLabelBySlot"].items())])
    if "injection" in probes:
        for name, a in probes["injection"]["attacks"].items():
            rows.append(["injection", f"{name}: success (points)", _fmt(a["success"], True)])
            rows.append(["injection", f"{name}: flagged", _fmt(a["flagRate"])])
    if "length" in probes:
        for name, f in probes["length"]["labelShift"].items():
            rows.append(["length", f"{name}: label shift", _fmt(f)])
    return rows


def print_table(document: Mapping[str, Any], console: Console | None = None) -> None:
    """The console summary; no figure is ever cut or folded."""
    from rich.console import Console
    from rich.markup import escape

    console = console or Console()
    judge = document.get("judge", {})
    agreement = document["modes"][next(iter(document["modes"]))]["agreement"]
    tables = [
        _table(
            "Agreement with human qrels (95% intervals over queries)",
            {"mode": True, "figure": True, **{subset: True for subset in agreement}},
            _agreement_rows(document),
        )
    ]
    rows, labelled = _system_rows(document)
    columns = {"mode": True, "system": True, "human": True, "judge": True, **({"labelled@10": True} if labelled else {})}
    names = next(iter(document["modes"].values())).get("qrels") or {}
    title = "Systems by nDCG@10: human qrels vs judge labels" + "".join(f"\n{k}: {v}" for k, v in names.items())
    tables.append(_table(title, columns, [r[: len(columns)] for r in rows]))
    probe_rows = _probe_rows(document.get("probes", {}))
    if probe_rows:
        tables.append(_table("Probes", {"probe": True, "figure": True, "value": True}, probe_rows))
    verdict = document["verdict"]
    title = f"Verdict: {verdict['status'].upper()}" + (": not enough evidence" if verdict["status"] == "insufficient" else "")
    checks = [[name, check["status"], check["message"]] for name, check in verdict["checks"].items()]
    tables.append(
        _table(f"{title} (mode {verdict['primaryMode']})", {"check": True, "status": True, "detail": False}, checks, {1: STATUS_COLOURS})
    )
    _fit(console, tables)
    console.print(
        f"[bold]Calibration of {escape(str(judge.get('provider')))} / {escape(str(judge.get('model')))}[/bold]"
        f"{' (HEURISTIC judge)' if judge.get('heuristic') else ''} on {escape(str(document['collection']['name']))}: "
        f"{document['collection']['queries']} queries, {document['pool']['pairs']} pooled pairs"
    )
    for table in tables:
        console.print(table)
    console.print(outputs_line(document.get("outputs")) or "", end="\n" if document.get("outputs") else "")
    spend = document["spend"]
    cost = "unknown" if spend["costUsd"] is None else f"${spend['costUsd']:.4f}"
    console.print(f"{calls_text(document)}; tokens in {spend['inputTokens']}, out {spend['outputTokens']}; cost {cost}")


def calls_text(document: Mapping[str, Any]) -> str:
    """``judge calls: 12 (pointwise 10, probe:position 2)``; with none, where the judge's labels came from."""
    spend = document["spend"]
    calls = ", ".join(f"{k} {v}" for k, v in spend["calls"].items() if v)
    if not calls and (document.get("labels") or {}).get("runs"):
        calls = "the judge's labels come from the run files"
    return f"judge calls: {spend['totalCalls']}" + (f" ({calls})" if calls else "")


def outputs_line(outputs: Mapping[str, Any] | None) -> str | None:
    """The reason-first vs grade-only comparison in one line, or None."""
    if not outputs:
        return None
    if "note" in outputs:
        return f"output comparison: {outputs['note']}"
    first, only = outputs["reason-first"], outputs["grade-only"]
    changed = outputs.get("labelsChanged")
    return (
        f"reason first vs grade only ({outputs['mode']}): kappa(>=2) {_fmt(first['kappaAt2'])} vs {_fmt(only['kappaAt2'])}; "
        f"system ranking tau_b {_fmt(first['kendallTauB'])} vs {_fmt(only['kendallTauB'])}; "
        f"labels changed {'n/a' if changed is None else f'{changed:.1%}'}"
    )


def calibration_folder(results: Path | str) -> Path:
    """``calibration/`` beside a results folder: where trend, report and the ``--min-overall`` warning look."""
    return Path(results).parent / DEFAULT_FOLDER


def calibration_for_provenance(folder: Path | str, provenance: Mapping[str, Any]) -> dict | None:
    """The latest calibration of the judge that wrote a run, by its fingerprint's comparability key, else the
    format-1 legacy key; None when there is none."""
    fingerprint = provenance.get("judgeFingerprint")
    return latest_calibration(folder, fingerprint if isinstance(fingerprint, Mapping) else legacy_key(provenance))
