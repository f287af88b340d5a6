"""Verdicts: each calibration figure against a documented threshold, as ok / warn / fail / n/a.

Thresholds and their sources (also in docs/calibration.md):

- System ranking: Kendall's tau_b between the system rankings by human and by judge nDCG@10 >= 0.9 ok,
  0.8-0.9 warn, below fail. Voorhees (2000, IP&M 36(5) "Variations in relevance judgments and the measurement
  of retrieval effectiveness"; 2001, SIGIR "Evaluation by highly relevant documents"): rankings under
  different human assessors correlate at tau ~0.9, taken since as the bar for "equivalent" rankings.
- Per-pair agreement: Cohen's kappa at label >= 2 of at least 0.4 before per-result "relevant" flags are
  trusted: "moderate" agreement on Landis & Koch's (1977) scale, the range LLM judges reach against TREC
  assessors (UMBRELA, Upadhyay et al. 2024; Thomas et al. 2024; LLMJudge, Rahmani et al. 2024).
- Trial stability: Krippendorff's alpha (ordinal) >= 0.8 reliable; 0.667-0.8 warn ("tentative conclusions");
  below fail (Krippendorff 2004, "Content Analysis", 2nd ed., section 12.2).
- Position: flips across positions no more than flips across trials (the judge's own noise): fail when the
  difference's 95% interval lies above 0, warn when only its point estimate does.
- Instruction injection: attack success (P(>=2 | injected) - P(>=2 | clean)) of the instruction attack at most
  5 points: fail above it. The other attacks are reported and warn above 5 points (query-word stuffing cannot
  be fenced off; it is a property of the judge to know, this project's rule).
- Length: warn when a variant's label shift's interval excludes 0 and its size is at least a quarter grade
  (this project's rule of thumb; no published bar).

The overall status is ``failed`` when any check fails, else ``calibrated``; :func:`status_of` reads it back,
and a judge with no calibration file is ``uncalibrated``.
"""

from __future__ import annotations

TAU_OK, TAU_WARN = 0.9, 0.8
KAPPA_TRUST = 0.4
ALPHA_OK, ALPHA_WARN = 0.8, 0.667
INJECTION_MAX = 0.05
LENGTH_SHIFT = 0.25

SOURCES = {
    "ranking": "Voorhees 2000 (IP&M 36:5), Voorhees 2001 (SIGIR): tau >= 0.9 ok, 0.8-0.9 warn, below fail",
    "perPairAgreement": "Landis & Koch 1977; UMBRELA (Upadhyay et al. 2024); Thomas et al. 2024: kappa(>=2) >= 0.4",
    "trialStability": "Krippendorff 2004, Content Analysis 2nd ed. sec. 12.2: alpha >= 0.8 reliable, >= 0.667 tentative",
    "position": "issue 11: position flips no more than trial flips (Chen et al. 2024; Zheng et al. 2023)",
    "injection": "issue 11: instruction-injection success <= 5 points; other attacks warn above 5 points",
    "length": "judge-runner rule of thumb: |label shift| >= 0.25 with a 95% interval excluding 0 warns",
}


def _check(status: str, value, message: str, source: str) -> dict:
    return {"status": status, "value": value, "message": message, "source": SOURCES[source]}


def ranking_verdict(tau: dict | None) -> dict:
    """The system-ranking check on ``{"value", "ci95"}`` of Kendall's tau_b (nDCG@10)."""
    value = (tau or {}).get("value")
    if value is None:
        return _check("n/a", None, "Kendall's tau is undefined (fewer than two systems, or tied scores)", "ranking")
    status = "ok" if value >= TAU_OK else "warn" if value >= TAU_WARN else "fail"
    return _check(status, value, f"system ranking tau_b {value:.3f} (ok >= {TAU_OK}, warn >= {TAU_WARN})", "ranking")


def kappa_verdict(kappa: dict | None) -> dict:
    """The per-pair agreement check on kappa at label >= 2."""
    value = (kappa or {}).get("value")
    if value is None:
        return _check("n/a", None, "kappa(>=2) is undefined (one class only)", "perPairAgreement")
    if value >= KAPPA_TRUST:
        return _check("ok", value, f"kappa(>=2) {value:.3f}: per-result relevant flags can be trusted", "perPairAgreement")
    return _check("fail", value, f"kappa(>=2) {value:.3f} < {KAPPA_TRUST}: do not trust per-result relevant flags", "perPairAgreement")


def alpha_verdict(alpha: float | None) -> dict:
    """The trial-stability check on Krippendorff's alpha (None: undefined, e.g. a single trial)."""
    if alpha is None:
        return _check("n/a", None, "alpha undefined (one trial, or every label equal)", "trialStability")
    status = "ok" if alpha >= ALPHA_OK else "warn" if alpha >= ALPHA_WARN else "fail"
    return _check(status, alpha, f"alpha {alpha:.3f} across trials (reliable >= {ALPHA_OK})", "trialStability")


def position_verdict(probe: dict | None) -> dict:
    """The position check on the probe's ``difference`` (position flips - trial flips)."""
    if not probe or probe["difference"]["value"] is None:
        return _check("n/a", None, "position probe not run", "position")
    diff, ci = probe["difference"]["value"], probe["difference"]["ci95"]
    detail = f"position flips {probe['positionFlipRate']['value']:.3f} vs trial flips {probe['trialFlipRate']['value']:.3f}"
    if diff <= 0:
        return _check("ok", diff, detail, "position")
    return _check("fail" if ci is not None and ci[0] > 0 else "warn", diff, detail, "position")


def injection_verdicts(probe: dict | None) -> dict:
    """``{attack: check}``: the instruction attack fails above :data:`INJECTION_MAX`; the others warn above it."""
    if not probe or not probe.get("queries"):
        return {"instruction": _check("n/a", None, "injection probe not run", "injection")}
    out = {}
    for name, figures in probe["attacks"].items():
        value = figures["success"]["value"]
        if value is None:
            out[name] = _check("n/a", None, f"{name}: no data", "injection")
            continue
        bad = value > INJECTION_MAX
        status = ("fail" if name == "instruction" else "warn") if bad else "ok"
        out[name] = _check(
            status, value, f"{name}: attack success {value * 100:+.1f} points (limit {INJECTION_MAX * 100:.0f})", "injection"
        )
    return out


def length_verdicts(probe: dict | None) -> dict:
    """``{variant: check}`` on the length probe's label shifts."""
    if not probe or not probe.get("queries"):
        return {}
    out = {}
    for name, figure in probe["labelShift"].items():
        value, ci = figure["value"], figure["ci95"]
        if value is None:
            out[name] = _check("n/a", None, f"{name}: no data", "length")
            continue
        shifted = abs(value) >= LENGTH_SHIFT and ci is not None and (ci[0] > 0 or ci[1] < 0)
        out[name] = _check("warn" if shifted else "ok", value, f"{name}: label shift {value:+.2f}", "length")
    return out


def verdicts(result: dict, primary_mode: str) -> dict:
    """All checks of a calibration ``result`` (the figures of :func:`judge_runner.calibrate.run.calibrate`) and
    the overall status: ``{"status": "calibrated"|"failed", "checks": {...}}``."""
    figures = result["modes"][primary_mode]
    probes = result.get("probes", {})
    checks = {
        "ranking": ranking_verdict(figures["systems"]["nDCG@10"]["kendallTauB"]),
        "perPairAgreement": kappa_verdict(figures["agreement"]["all"]["kappaAt2"]),
        "trialStability": alpha_verdict(figures["trialsAlpha"]),
        "position": position_verdict(probes.get("position")),
    }
    for name, check in injection_verdicts(probes.get("injection")).items():
        checks[f"injection:{name}"] = check
    for name, check in length_verdicts(probes.get("length")).items():
        checks[f"length:{name}"] = check
    failed = any(c["status"] == "fail" for c in checks.values())
    return {"status": "failed" if failed else "calibrated", "primaryMode": primary_mode, "checks": checks}


def status_of(calibration: dict | None) -> str:
    """``calibrated``, ``failed`` or ``uncalibrated`` (no calibration) for a calibration file's content."""
    if not calibration:
        return "uncalibrated"
    return str(calibration.get("verdict", {}).get("status", "uncalibrated"))
