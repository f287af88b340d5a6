"""How far the corrected mean (PPI++, cross-fitted) sits from a fixed small query set's own mean, on average.

    .venv/bin/python benchmarks/ppi_fixed_set_bias.py [--draws 20000] [--labelled 30] [--sizes 100,200,400]

The estimator (judge_runner.measures.ppi.tuned_mean) targets the mean over queries like these; the check here is
against the mean of the N queries the labelled ones are drawn from (simple random sampling without replacement),
as docs/deciding.md's SciFact figure is. A synthetic paired difference per query: half the queries the judge sees
no difference (0), the others a small one (normal, sd 0.1), and one query in 40 a large one (+-0.8: high leverage);
the people's difference is 0.7 times the judge's plus noise, clipped to [-1, 1]. For each N: the mean error of the
reported estimate and of the always-tuned one (the cross-fitted terms without the fall-back to the people's own
figure), in thousandths and in standard errors over the draws.

Shows that each of the estimator's two data-dependent choices can leave a small bias against a fixed set's mean,
as docs/deciding.md's SciFact figure found (-0.0028): the leave-one-out weight (a labelled query's weight is fitted
on the others, which, drawn without replacement, seldom include the few high-leverage queries when it is one of
them) and the fall-back to the people's own figure when the judge does not narrow the interval. Here (20,000
draws): always tuned +2.6e-3 at N 100, reported +0.5e-3 at N 200, both under a tenth of the interval's mean
half-width, printed beside. About a minute on two cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_runner.measures.ppi import _cross_fitted_weights, tuned_mean  # noqa: E402


def population(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(judge's differences, people's differences)`` of ``n`` queries (module docstring)."""
    rng = np.random.default_rng(seed)
    f = np.where(rng.random(n) < 0.5, 0.0, rng.normal(0.0, 0.1, n))
    k = max(n // 40, 1)
    f[:k] = rng.choice([-0.8, 0.8], k)
    y = np.clip(0.7 * f + rng.normal(0, 0.1, n) * (f != 0), -1, 1)
    return f, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--labelled", type=int, default=30)
    parser.add_argument("--sizes", default="100,200,400")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.draws} draws of {args.labelled} labelled queries; error of the mean estimate against the set's own mean")
    for n in (int(s) for s in args.sizes.split(",")):
        f, y = population(n, 9)
        truth = float(y.mean())
        reported, always, half = np.empty(args.draws), np.empty(args.draws), np.empty(args.draws)
        for d in range(args.draws):
            idx = rng.choice(n, args.labelled, replace=False)
            found = tuned_mean(f, f[idx], y[idx], bounds=(-1, 1))
            assert found is not None
            reported[d] = found.estimate
            half[d] = (found.ci95[1] - found.ci95[0]) / 2
            lam = _cross_fitted_weights(f[idx], y[idx], float(f.var(ddof=1)))
            always[d] = float((y[idx] - lam * (f[idx] - f.mean())).mean())
        cells = []
        for name, values in (("reported", reported), ("always tuned", always)):
            error = float(values.mean()) - truth
            se = float(values.std(ddof=1)) / np.sqrt(args.draws)
            cells.append(f"{name} {error * 1000:+.2f}e-3 ({error / se:+.1f} SE)")
        print(f"  N {n:4d}: " + "; ".join(cells) + f"; mean half-width {half.mean():.3f}")


if __name__ == "__main__":
    main()
