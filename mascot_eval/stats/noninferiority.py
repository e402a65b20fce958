"""Non-inferiority verdicts for a regression gate, from confidence bounds on a paired difference.

For one measure, ``d`` holds the differences candidate - baseline on shared units, *oriented* so
that a positive value is better (lower-is-better measures are negated first), with the context
(cluster) of each unit. The gate tolerates a drop of ``margin`` (m > 0, in the measure's units):

* the mean difference gets a standard error from a cluster bootstrap over contexts (whole contexts
  are resampled, as in the run summary), turned into an effective per-context standard deviation
  ``sd = se * sqrt(n) * sqrt(n / (n - 1))`` (the bootstrap's variance is (n-1)/n of the usual one);
* each bound is one-sided at level 1 - alpha: ``diff -/+ t(1 - alpha, n - 1) * sd / sqrt(n)``; with
  equal-sized contexts this is exactly the paired t bound on per-context means;
* **PASS** (non-inferior) when the lower bound is above -m; **FAIL** when the upper bound is below
  -m (``fail_on="point"``: also when the point estimate alone is below -m); otherwise
  **INCONCLUSIVE**. With fewer contexts than ``min_contexts(alpha)`` = ceil(log2(1 / alpha)) no
  verdict is given at all: even if every context moved the same way, no distribution-free test at
  that level could tell the move from chance, so a t bound there would rest on normality alone.

Several measures: :func:`bonferroni` splits the family-wise error ``alpha`` over the K bounds
(each at alpha / K), so the chance that *any* verdict of the gate is a false FAIL (or any is a false
PASS) is at most alpha, whatever the correlation between the measures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import t as student_t

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
FAIL_ON = ("bound", "point")


@dataclass(frozen=True)
class GateBound:
    """Oriented mean difference (positive = candidate better) with one-sided bounds at 1 - alpha."""

    diff: float
    lo: float
    hi: float
    se: float  # cluster-bootstrap standard error of ``diff``
    sd: float  # effective standard deviation of per-context differences (see module doc)
    n: int  # contexts
    n_obs: int  # units
    alpha: float  # one-sided level of each bound
    crit: float  # t critical value used

    def to_dict(self) -> dict[str, float | int]:
        return {
            "diff": self.diff,
            "lo": self.lo,
            "hi": self.hi,
            "se": self.se,
            "sd": self.sd,
            "n": self.n,
            "n_obs": self.n_obs,
            "alpha": self.alpha,
            "crit": self.crit,
        }


def bonferroni(alpha: float, k: int) -> float:
    """One-sided level of each of ``k`` bounds so that the family-wise error is at most ``alpha``."""
    return alpha / max(int(k), 1)


def min_contexts(alpha: float) -> int:
    """Fewest contexts at which an exact sign-flip test at one-sided level ``alpha`` can reject at all."""
    return max(2, math.ceil(math.log2(1.0 / alpha) - 1e-12))


def t_crit(alpha: float, n: int) -> float:
    """One-sided t critical value with n - 1 degrees of freedom (inf below two contexts)."""
    if n < 2:
        return math.inf
    return float(student_t.ppf(1.0 - alpha, n - 1))


def cluster_bootstrap_se(
    values: Sequence[float] | npt.NDArray[Any], clusters: Sequence[object], *, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, int]:
    """(mean, bootstrap standard error, number of clusters) of the observation-weighted mean, resampling
    whole clusters with replacement (the estimator of :func:`mascot_eval.stats.bootstrap.bootstrap_mean`)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan"), 0
    _, ids = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = int(ids.max()) + 1
    mean = float(x.mean())
    if k < 2:
        return mean, float("nan"), k
    sums = np.bincount(ids, weights=x, minlength=k)
    counts = np.bincount(ids, minlength=k).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(n_boot, k))
    boot = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    return mean, float(boot.std(ddof=1)), k


def gate_bound(
    d: Sequence[float] | npt.NDArray[Any], clusters: Sequence[object], *, alpha: float, n_boot: int = 2000, seed: int = 0
) -> GateBound:
    """Bounds on the oriented mean difference ``d`` (see the module doc)."""
    x = np.asarray(d, dtype=float)
    mean, se, n = cluster_bootstrap_se(x, clusters, n_boot=n_boot, seed=seed)
    if n < 2 or not np.isfinite(se):
        return GateBound(mean, -math.inf, math.inf, float("nan"), float("nan"), n, int(x.size), alpha, math.inf)
    if se <= 1e-12 * max(1.0, float(np.abs(x).max())):  # every resample gives the same mean
        se = 0.0
    sd = se * math.sqrt(n) * math.sqrt(n / (n - 1))
    crit = t_crit(alpha, n)
    half = crit * sd / math.sqrt(n)
    return GateBound(mean, mean - half, mean + half, se, sd, n, int(x.size), alpha, crit)


def decide(b: GateBound, margin: float, *, fail_on: str = "bound") -> tuple[str, str]:
    """(verdict, reason) for a bound and a margin (the drop tolerated, >= 0)."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {FAIL_ON}")
    need = min_contexts(b.alpha)
    if b.n < need:
        return INCONCLUSIVE, f"{b.n} context(s): at least {need} are needed for any verdict at one-sided level {b.alpha:.3g}"
    if b.lo > -margin:
        return PASS, f"lower bound {b.lo:+.3g} > -{margin:g}"
    if b.hi < -margin:
        return FAIL, f"upper bound {b.hi:+.3g} < -{margin:g}"
    if fail_on == "point" and b.diff < -margin:
        return FAIL, f"point drop {-b.diff:.3g} > {margin:g} (bound not below the margin; --fail-on point)"
    return INCONCLUSIVE, f"bounds [{b.lo:+.3g}, {b.hi:+.3g}] straddle -{margin:g}"
