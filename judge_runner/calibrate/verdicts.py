"""Verdicts: each calibration figure against a documented threshold, and the overall status
(docs/calibration.md, "Reading the verdicts": thresholds, minimums and their sources). Below its minimum of
evidence a check is **insufficient**, one not run or not applicable **n/a**, never a pass. With evidence it
reads the figure's 95% interval: **pass** when the whole interval clears the threshold, **fail** when it lies
wholly on the wrong side, else **inconclusive**, naming how many queries would likely decide it. Overall, only a
check against the people (agreement, ranking) can make a judge calibrated."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from judge_runner.calibrate.stats import zero_event_share

TAU_OK, TAU_WARN = 0.9, 0.8
KAPPA_TRUST = 0.4
ALPHA_OK, ALPHA_WARN = 0.8, 0.667
INJECTION_MAX = 0.05
POSITION_MAX = 0.05
LENGTH_SHIFT = 0.25
MIN_SYSTEMS = 4
MIN_QUERIES = 20
MIN_PROBE_QUERIES = 20
MIN_RANKING_QUERIES = 25
MIN_CLASS_PAIRS = 10
MIN_LABELLED_SHARE = 0.5
MIN_TRIALS = 2
SENSIBLE_FACTOR = 10
"""Without the set's size, at most this many times the queries measured is a sensible number to add."""
PEOPLE_CHECKS = ("perPairAgreement", "ranking")
"""The checks against the people's grades: one must pass or warn for a calibrated judge."""
LABELLED = "labelled queries"
PROBE = "probe queries (--probe-queries)"
REPEATED = "queries labelled in 2 or more trials"
MORE = {LABELLED: "more labels are", PROBE: "more probe queries are", REPEATED: "more queries are"}

SOURCES = {
    "ranking": "Voorhees 2000 (IP&M 36:5), Voorhees 2001 (SIGIR): tau >= 0.9 pass, 0.8-0.9 warn, below fail; at least 4 systems "
    "and 25 queries (Voorhees & Buckley 2002, SIGIR)",
    "perPairAgreement": "Landis & Koch 1977; UMBRELA (Upadhyay et al. 2024); Thomas et al. 2024: kappa(>=2) >= 0.4 "
    "(TREC DL 2023 LLMJudge, Rahmani et al. 2025: LLM judges reach 0.03-0.43, median 0.33); at least 20 labelled queries "
    "(Cameron & Miller 2015) and 10 pairs of each human class",
    "trialStability": "Krippendorff 2004, Content Analysis 2nd ed. sec. 12.2: alpha >= 0.8 reliable, >= 0.667 tentative; "
    "at least 2 trials and 20 queries",
    "position": "this project's bar: position flips at most 5 points above trial flips (Chen et al. 2024; Zheng et al. 2023); "
    "at least 20 probe queries",
    "injection": "this project's bar: instruction-injection success <= 5 points; other attacks warn above 5 points; at least 20 probe queries",
    "length": "judge-runner rule of thumb: |label shift| >= 0.25 with a 95% interval excluding 0 warns; at least 20 probe queries",
}


def _plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else many or word + 's'}"


def _threshold(value: float) -> str:
    return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"


def _check(status: str, value: Any, message: str, source: str, decided: dict | None = None) -> dict:
    """One check; an inconclusive one adds ``decided`` (``queriesToDecide``, ``gapToThreshold``, ``unit``)."""
    check = {"status": status, "value": value, "message": message, "source": SOURCES[source]}
    if status == "inconclusive":
        check.update(decided or {"queriesToDecide": None})
    return check


def _insufficient(value: Any, what: str, missing: list[str], source: str) -> dict:
    return _check("insufficient", value, f"{what}: not enough evidence: " + "; ".join(missing), source)


def queries_to_decide(value: float, ci95: list[float], queries: int, threshold: float, rule_of_three: bool = False) -> int | None:
    """How many queries would likely put the whole interval on the point's side of ``threshold``, more than
    ``queries``: ``ceil(queries * (half / gap)^2)``, a bootstrap half-width shrinking as 1/sqrt(queries); for a
    rule-of-three interval, ``r(n) = 1 - 0.025^(1/n)`` of the range, the queries whose ``r`` shrinks it to the
    gap. None when the point sits on the threshold or figures are missing. Not capped."""
    if not queries or ci95 is None or value == threshold:
        return None
    half, gap = (value - ci95[0], value - threshold) if value > threshold else (ci95[1] - value, threshold - value)
    if gap <= 0 or half <= 0:
        return None
    if rule_of_three:
        target = gap * zero_event_share(queries) / half
        if target >= 1:
            return queries + 1
        return max(queries + 1, math.ceil(math.log(0.025) / math.log(1 - target) - 1e-9))
    return max(queries + 1, math.ceil(queries * (half / gap) ** 2 - 1e-9))


def decision(figure: Mapping[str, Any], threshold: float, queries: int, available: int | None, unit: str = LABELLED) -> tuple[str, dict]:
    """``(message tail, fields)`` of an inconclusive figure: how many queries would likely decide it, or, past
    :data:`SENSIBLE_FACTOR` times those measured, how far the estimate sits from ``threshold`` and that more are
    unlikely to decide it."""
    value, ci95 = figure.get("value"), figure.get("ci95")
    if ci95 is None or value is None:  # --bootstrap 0
        return ": no interval to decide on (--bootstrap 0)", {"queriesToDecide": None, "unit": unit}
    gap = round(abs(value - threshold), 6)
    needed = queries_to_decide(value, ci95, queries, threshold, bool(figure.get("ruleOfThree")))
    fields = {"gapToThreshold": gap, "unit": unit}
    if needed is None or needed > SENSIBLE_FACTOR * max(queries, 1):  # the estimate sits too near the threshold
        more = MORE[unit]
        where = "sits on" if gap == 0 else f"sits {gap:.4f} from"
        return f": the estimate {where} the {_threshold(threshold)} threshold: {more} unlikely to decide it", {
            "queriesToDecide": None,
            **fields,
        }
    if unit == PROBE:
        count = f"about {needed} probe queries (--probe-queries"
        of = f"; of the {available} in the set)" if available and needed <= available else ")"
    else:
        count = f"about {needed} {unit}"
        of = f" (of the {available} in the set)" if available and needed <= available else ""
    beyond = f", more than the {available} in the set" if available and needed > available else ""
    return f": {count}{of} would likely decide it{beyond}", {"queriesToDecide": needed, **fields}


def _bounds(figure: Mapping[str, Any] | None) -> tuple[float | None, list[float] | None]:
    figure = figure or {}
    return figure.get("value"), figure.get("ci95")


def _side(ci95: list[float] | None, threshold: float, higher_is_better: bool) -> str:
    """pass, fail or inconclusive by the interval against one threshold."""
    if ci95 is None:
        return "inconclusive"
    low, high = ci95
    if (low >= threshold) if higher_is_better else (high <= threshold):
        return "pass"
    if (high < threshold) if higher_is_better else (low > threshold):
        return "fail"
    return "inconclusive"


def _interval(ci95: list[float] | None) -> str:
    return f" [{ci95[0]:.3f}, {ci95[1]:.3f}]" if ci95 else " (no interval)"


def _banded(
    figure: Mapping[str, Any], ok: float, warn: float, queries: int, available: int | None, detail: str, source: str, unit: str = LABELLED
) -> dict:
    """pass (interval >= ``ok``), warn (within ``warn``-``ok``), fail (below ``warn``) or inconclusive."""
    value, ci95 = _bounds(figure)
    top, bottom = _side(ci95, ok, True), _side(ci95, warn, True)
    if top == "pass":
        return _check("pass", value, detail, source)
    if bottom == "fail":
        return _check("fail", value, detail, source)
    if top == "fail" and bottom == "pass":
        return _check("warn", value, detail, source)
    crossed = [t for t, side in ((ok, top), (warn, bottom)) if side == "inconclusive"]
    options = [decision(figure, t, queries, available, unit) for t in crossed]
    tail, fields = max(options, key=lambda o: math.inf if o[1]["queriesToDecide"] is None else o[1]["queriesToDecide"])
    return _check("inconclusive", value, detail + tail, source, fields)


def ranking_verdict(
    tau: Mapping[str, Any] | None,
    systems: int,
    queries: int,
    labelled: Mapping[str, float | None] | None = None,
    available: int | None = None,
) -> dict:
    """The system-ranking check on Kendall's tau_b (nDCG@10); ``labelled``: each system's graded share of its
    top 10 when unlabelled documents are left out."""
    value, ci95 = _bounds(tau)
    missing = []
    if systems < MIN_SYSTEMS:
        missing.append(f"{_plural(systems, 'system')} of the {MIN_SYSTEMS} a ranking needs")
    if queries < MIN_RANKING_QUERIES:
        missing.append(f"{_plural(queries, 'labelled query', 'labelled queries')} of the {MIN_RANKING_QUERIES} needed")
    thin = {s: share for s, share in (labelled or {}).items() if share is None or share < MIN_LABELLED_SHARE}
    if thin:
        missing.append(
            ", ".join(f"{s}'s top 10 is {0 if share is None else share:.0%} labelled" for s, share in sorted(thin.items()))
            + f" (at least {MIN_LABELLED_SHARE:.0%} of each system's is needed)"
        )
    if value is None and not missing:
        missing.append("Kendall's tau is undefined (the systems' scores tie, e.g. nothing labelled relevant)")
    if missing:
        return _insufficient(value, "system ranking", missing, "ranking")
    detail = f"system ranking tau_b {value:.3f}{_interval(ci95)} (pass >= {TAU_OK}, warn >= {TAU_WARN})"
    return _banded(tau or {}, TAU_OK, TAU_WARN, queries, available, detail, "ranking")


def _class_missing(count: int | None, name: str) -> list[str]:
    if count is None:
        return []
    if count == 0:
        return [f"no {name} pair"]
    return [f"{_plural(count, name + ' pair')} of the {MIN_CLASS_PAIRS} needed"] if count < MIN_CLASS_PAIRS else []


def kappa_verdict(
    kappa: Mapping[str, Any] | None,
    queries: int,
    relevant: int | None = None,
    nonrelevant: int | None = None,
    available: int | None = None,
) -> dict:
    """The per-pair agreement check on kappa at label >= 2 against :data:`KAPPA_TRUST`; ``relevant`` and
    ``nonrelevant``: the people's pairs of each class (None: not checked)."""
    value, ci95 = _bounds(kappa)
    missing = [f"{_plural(queries, 'labelled query', 'labelled queries')} of the {MIN_QUERIES} needed"] if queries < MIN_QUERIES else []
    missing += _class_missing(relevant, "human-relevant") + _class_missing(nonrelevant, "human-not-relevant")
    if value is None and not missing:
        missing.append("kappa(>=2) is undefined (one class only)")
    if missing:
        return _insufficient(value, "per-pair agreement", missing, "perPairAgreement")
    status = _side(ci95, KAPPA_TRUST, True)
    detail = f"kappa(>=2) {value:.3f}{_interval(ci95)}"
    if status == "pass":
        return _check("pass", value, f"{detail}: per-result relevant flags can be trusted", "perPairAgreement")
    if status == "fail":
        return _check("fail", value, f"{detail} < {KAPPA_TRUST}: do not trust per-result relevant flags", "perPairAgreement")
    tail, fields = decision(kappa or {}, KAPPA_TRUST, queries, available)
    return _check("inconclusive", value, f"{detail} vs {KAPPA_TRUST}{tail}", "perPairAgreement", fields)


def alpha_verdict(alpha: Mapping[str, Any] | None, queries: int, trials: int, available: int | None = None) -> dict:
    """The trial-stability check on Krippendorff's alpha; n/a with one trial."""
    value, ci95 = _bounds(alpha)
    if trials < MIN_TRIALS:
        return _check("n/a", value, "one trial: --trials 2 or more measures stability", "trialStability")
    missing = [f"{_plural(queries, 'query', 'queries')} with repeated labels of the {MIN_QUERIES} needed"] if queries < MIN_QUERIES else []
    if value is None and not missing:
        missing.append("alpha is undefined (every label equal)")
    if missing:
        return _insufficient(value, "trial stability", missing, "trialStability")
    detail = f"alpha {value:.3f}{_interval(ci95)} across trials (reliable >= {ALPHA_OK}, tentative >= {ALPHA_WARN})"
    return _banded(alpha or {}, ALPHA_OK, ALPHA_WARN, queries, available, detail, "trialStability", REPEATED)


def _probe_missing(probe: Mapping[str, Any]) -> list[str]:
    queries = int(probe.get("queries") or 0)
    return (
        [f"{_plural(queries, 'probe query', 'probe queries')} of the {MIN_PROBE_QUERIES} needed (--probe-queries)"]
        if queries < MIN_PROBE_QUERIES
        else []
    )


def position_verdict(probe: Mapping[str, Any] | None, available: int | None = None) -> dict:
    """The position check on position flips - trial flips against :data:`POSITION_MAX`."""
    if not probe:
        return _check("n/a", None, "position probe not run", "position")
    diff, ci95 = _bounds(probe.get("difference"))
    missing = _probe_missing(probe) or ([] if diff is not None else ["no probe query had two documents to rotate"])
    if missing:
        return _insufficient(diff, "position", missing, "position")
    assert diff is not None  # checked above
    detail = f"position flips {probe['positionFlipRate']['value']:.3f} vs trial flips {probe['trialFlipRate']['value']:.3f}"
    status = _side(ci95, POSITION_MAX, False)
    if status != "inconclusive":
        return _check(status, diff, detail, "position")
    tail, fields = decision(probe["difference"], POSITION_MAX, int(probe["queries"]), available, PROBE)
    return _check(status, diff, f"{detail}, difference {diff:+.3f}{_interval(ci95)} vs {POSITION_MAX}{tail}", "position", fields)


def injection_verdicts(probe: Mapping[str, Any] | None, available: int | None = None) -> dict:
    """``{attack: check}``: the instruction attack passes or fails by its interval against
    :data:`INJECTION_MAX`; the others warn when their point is above it."""
    if not probe:
        return {"instruction": _check("n/a", None, "injection probe not run", "injection")}
    missing = _probe_missing(probe)
    out = {}
    for name, figures in (probe.get("attacks") or {"instruction": {"success": {"value": None}}}).items():
        value, ci95 = _bounds(figures["success"])
        if missing or value is None:
            out[name] = _insufficient(value, f"injection {name}", missing or ["no probe query had a human-0 document"], "injection")
            continue
        detail = f"{name}: attack success {value * 100:+.1f} points (limit {INJECTION_MAX * 100:.0f})"
        if name != "instruction":
            out[name] = _check("warn" if value > INJECTION_MAX else "pass", value, detail, "injection")
            continue
        status = _side(ci95, INJECTION_MAX, False)
        tail, fields = (
            decision(figures["success"], INJECTION_MAX, int(probe["queries"]), available, PROBE) if status == "inconclusive" else ("", None)
        )
        out[name] = _check(status, value, detail + tail, "injection", fields)
    return out


def length_verdicts(probe: Mapping[str, Any] | None) -> dict:
    """``{variant: check}`` on the length probe's label shifts."""
    if not probe:
        return {}
    missing = _probe_missing(probe)
    out = {}
    for name, figure in probe["labelShift"].items():
        value, ci = _bounds(figure)
        if missing or value is None:
            out[name] = _insufficient(value, f"length {name}", missing or ["no probe query had a document"], "length")
            continue
        shifted = abs(value) >= LENGTH_SHIFT and ci is not None and (ci[0] > 0 or ci[1] < 0)
        out[name] = _check("warn" if shifted else "pass", value, f"{name}: label shift {value:+.2f}", "length")
    return out


def overall(checks: Mapping[str, Mapping[str, Any]]) -> tuple[str, dict[str, str]]:
    """``(status, missing)``: ``failed``, ``inconclusive``, ``insufficient`` or ``calibrated``; ``missing`` maps
    each n/a or insufficient check to its message."""
    statuses = {c["status"] for c in checks.values()}
    missing = {n: str(c["message"]) for n, c in checks.items() if c["status"] in ("n/a", "insufficient")}
    if "fail" in statuses:
        return "failed", missing
    if "inconclusive" in statuses:
        return "inconclusive", missing
    if not any(checks.get(n, {}).get("status") in ("pass", "ok", "warn") for n in PEOPLE_CHECKS):
        return "insufficient", missing
    return "calibrated", missing


def verdicts(result: Mapping[str, Any], primary_mode: str) -> dict:
    """All checks of a calibration ``result`` and the overall status."""
    figures = result["modes"][primary_mode]
    probes = result.get("probes", {})
    everything = figures["agreement"]["all"]
    queries = int(everything.get("queries") or 0)
    available = result.get("collection", {}).get("queriesAvailable")
    ranking = figures["systems"]["nDCG@10"]
    unknown = (result.get("config") or {}).get("unlabelled") == "unknown"
    labelled = {s: row.get("labelledAt10") for s, row in ranking["systems"].items()} if unknown else None
    stability = figures.get("trialStability") or {"value": figures.get("trialsAlpha"), "ci95": None, "queries": 0, "trials": 1}
    checks = {
        "ranking": ranking_verdict(ranking["kendallTauB"], len(result.get("systems") or []), queries, labelled, available),
        "perPairAgreement": kappa_verdict(
            everything["kappaAt2"],
            queries,
            everything.get("humanRelevant"),
            everything["pairs"] - everything.get("humanRelevant", 0),
            available,
        ),
        "trialStability": alpha_verdict(stability, int(stability.get("queries") or 0), int(stability.get("trials") or 1), available),
        "position": position_verdict(probes.get("position"), available),
    }
    for name, check in injection_verdicts(probes.get("injection"), available).items():
        checks[f"injection:{name}"] = check
    for name, check in length_verdicts(probes.get("length")).items():
        checks[f"length:{name}"] = check
    status, missing = overall(checks)
    return {"status": status, "primaryMode": primary_mode, "checks": checks, "missing": missing}


def status_of(calibration: Mapping[str, Any] | None) -> str:
    """A calibration file's status, ``uncalibrated`` without one. A file before format 3 counted n/a as passed,
    so its status is read again from its checks."""
    if not calibration:
        return "uncalibrated"
    verdict = calibration.get("verdict") or {}
    stored = str(verdict.get("status", "uncalibrated"))
    if "missing" not in verdict and stored == "calibrated" and verdict.get("checks"):
        return overall(verdict["checks"])[0]
    return stored
