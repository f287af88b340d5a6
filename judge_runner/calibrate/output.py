"""Calibration files: writing (``calibration/<time id>.json``, :func:`judge_runner.core.ids.time_id`; checked against
``schemas/calibration.schema.json``), finding the latest one for a judge fingerprint, and the console table."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema

from judge_runner.calibrate.verdicts import status_of
from judge_runner.core.ids import sort_key, time_id
from judge_runner.core.resources import load_schema
from judge_runner.judging.fingerprint import comparability_key, legacy_key

DEFAULT_FOLDER = Path("calibration")


def schema_problems(document: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a calibration document against its schema (empty when valid)."""
    validator = jsonschema.Draft202012Validator(load_schema("calibration.schema.json"))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(document)][:20]


def default_path(folder: Path = DEFAULT_FOLDER, now: datetime | None = None) -> Path:
    """``folder/<name>.json``, the name time-ordered and unique across folders and machines
    (:func:`judge_runner.core.ids.time_id`: ``20261130T181500.123Z-3f9a0c``); another suffix is drawn while the
    name is taken."""
    while True:
        path = folder / f"{time_id(now)}.json"
        if not path.exists():
            return path


def write_calibration(document: Mapping[str, Any], path: Path) -> Path:
    """Validate and write ``document`` to ``path`` (folders created; written to a temporary file of its own
    in the same folder, then renamed, so a reader never sees half a file and two writers never share one).
    Raises ValueError listing schema problems."""
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
    """When a calibration was made (its ``createdAt``, ISO 8601 to the second or the millisecond; a missing
    or unreadable one counts as the earliest time). Compared as times, not strings: ``09:00:00Z`` is earlier
    than ``09:00:00.500Z``, which string order gets wrong."""
    try:
        moment = datetime.fromisoformat(str(document.get("createdAt", "")))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _key(fingerprint: str | Mapping[str, Any]) -> str:
    return fingerprint if isinstance(fingerprint, str) else comparability_key(fingerprint)


def latest_calibration(folder: Path | str, fingerprint: str | Mapping[str, Any]) -> dict | None:
    """The most recent calibration in ``folder`` (``*.json``, newest :func:`created_at` first) whose judge matches
    ``fingerprint``: a fingerprint dict (``JudgeFingerprint.as_dict()``, compared by
    :func:`judge_runner.judging.fingerprint.comparability_key`) or a key string, matched against the file's
    ``judge.fingerprintKey`` or ``judge.legacyKey`` (a format-version-1 run's ``legacy_key``). Unreadable or
    foreign JSON files are skipped. None when nothing matches or the folder does not exist."""
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


def calibration_line(calibration: Mapping[str, Any] | None) -> str:
    """One line for trend and report: ``judge calibration: calibrated (2026-11-30, kappa(>=2) 0.61, tau 0.93)``,
    ``failed (...; failed: ranking)``, ``inconclusive (...; inconclusive: perPairAgreement, about 120 labelled
    queries would decide it)`` or ``uncalibrated``."""
    status = status_of(dict(calibration) if calibration else None)
    if not calibration:
        return "judge calibration: uncalibrated (run judge-runner calibrate to measure it)"
    checks = calibration.get("verdict", {}).get("checks", {})
    parts = [str(calibration.get("createdAt", ""))[:10]]
    for name, label in (("perPairAgreement", "kappa(>=2)"), ("ranking", "tau")):
        value = checks.get(name, {}).get("value")
        if value is not None and checks[name].get("status") != "n/a":
            parts.append(f"{label} {value:.2f}")
    failed = [n for n, c in checks.items() if c.get("status") == "fail"]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    open_checks = {n: c.get("queriesToDecide") for n, c in checks.items() if c.get("status") == "inconclusive"}
    if open_checks:
        needed = [q for q in open_checks.values() if q]
        parts.append(
            "inconclusive: "
            + ", ".join(open_checks)
            + (f", about {max(needed)} labelled queries would decide {'them' if len(open_checks) > 1 else 'it'}" if needed else "")
        )
    return f"judge calibration: {status} ({', '.join(parts)})"


def _fmt(figure: Mapping[str, Any] | None, percent: bool = False) -> str:
    if not figure or figure.get("value") is None:
        return "n/a"
    scale = 100 if percent else 1
    value = f"{figure['value'] * scale:+.1f}" if percent else f"{figure['value']:.3f}"
    ci = figure.get("ci95")
    if ci:
        value += f" [{ci[0] * scale:.1f}, {ci[1] * scale:.1f}]" if percent else f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return value


def print_table(document: Mapping[str, Any], console: Any = None) -> None:
    """The console summary (rich tables): agreement per mode and subset, system rankings, probes, verdicts."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    judge = document.get("judge", {})
    console.print(
        f"[bold]Calibration of {judge.get('provider')} / {judge.get('model')}[/bold]"
        f"{' (HEURISTIC judge)' if judge.get('heuristic') else ''} on {document['collection']['name']}: "
        f"{document['collection']['queries']} queries, {document['pool']['pairs']} pooled pairs"
    )
    table = Table(title="Agreement with human qrels (95% query-bootstrap intervals)")
    for column in ("mode", "subset", "pairs", "kappa(>=2)", "kappa(>=1)", "kappa 0-3", "weighted (quadratic)", "P(>=2 | qrels 0)"):
        table.add_column(column)
    for mode, figures in document["modes"].items():
        for subset, a in figures["agreement"].items():
            table.add_row(
                mode,
                subset,
                str(a["pairs"]),
                _fmt(a["kappaAt2"]),
                _fmt(a["kappaAt1"]),
                _fmt(a.get("kappaUnweighted")),
                _fmt(a["kappaQuadratic"]),
                _fmt(a["overLabelling"]),
            )
    console.print(table)
    systems = Table(title="Systems by nDCG@10: human qrels vs judge labels")
    systems.add_column("mode")
    systems.add_column("system")
    systems.add_column("human")
    systems.add_column("judge")
    for mode, figures in document["modes"].items():
        for name, pair in figures["systems"]["nDCG@10"]["systems"].items():
            systems.add_row(mode, name, f"{pair['human']:.3f}", f"{pair['judge']:.3f}")
        systems.add_row(mode, "[bold]Kendall tau_b[/bold]", "", _fmt(figures["systems"]["nDCG@10"]["kendallTauB"]))
    console.print(systems)
    probes = document.get("probes", {})
    if probes:
        pt = Table(title="Probes")
        pt.add_column("probe")
        pt.add_column("figure")
        pt.add_column("value")
        if "position" in probes:
            p = probes["position"]
            pt.add_row("position", "flip rate across positions", _fmt(p["positionFlipRate"]))
            pt.add_row("position", "flip rate across trials", _fmt(p["trialFlipRate"]))
            pt.add_row("position", "mean label by slot", " ".join(f"{s}:{v:.2f}" for s, v in p["meanLabelBySlot"].items()))
        if "injection" in probes:
            for name, a in probes["injection"]["attacks"].items():
                pt.add_row("injection", f"{name}: success (points) / flagged", f"{_fmt(a['success'], True)} / {_fmt(a['flagRate'])}")
        if "length" in probes:
            for name, f in probes["length"]["labelShift"].items():
                pt.add_row("length", f"{name}: label shift", _fmt(f))
        console.print(pt)
    verdict = document["verdict"]
    vt = Table(title=f"Verdict: {verdict['status'].upper()} (mode {verdict['primaryMode']})")
    vt.add_column("check")
    vt.add_column("status")
    vt.add_column("detail")
    for name, check in verdict["checks"].items():
        colour = {"pass": "green", "ok": "green", "warn": "yellow", "inconclusive": "cyan", "fail": "red"}.get(check["status"], "white")
        vt.add_row(name, f"[{colour}]{check['status']}[/{colour}]", check["message"])
    console.print(vt)
    spend = document["spend"]
    cost = "unknown" if spend["costUsd"] is None else f"${spend['costUsd']:.4f}"
    console.print(
        f"judge calls: {spend['totalCalls']} ({', '.join(f'{k} {v}' for k, v in spend['calls'].items())}); "
        f"tokens in {spend['inputTokens']}, out {spend['outputTokens']}; cost {cost}"
    )


def calibration_folder(results: Path | str) -> Path:
    """Where trend, report and the ``--min-overall`` warning look for calibrations of a results folder's runs:
    ``calibration/`` beside it (``calibrate``'s default output folder when both are run from the same place)."""
    return Path(results).parent / DEFAULT_FOLDER


def calibration_for_provenance(folder: Path | str, provenance: Mapping[str, Any]) -> dict | None:
    """The latest calibration of the judge that wrote a run, from its ``run_start.provenance``: by the
    comparability key of ``judgeFingerprint`` (format version 2), else by the format-version-1 legacy key
    (provider, judge model, judge prompt hashes). None when there is none."""
    fingerprint = provenance.get("judgeFingerprint")
    return latest_calibration(folder, fingerprint if isinstance(fingerprint, Mapping) else legacy_key(provenance))
