"""Paired tests between two systems on shared contexts, with effect sizes.

* :func:`wilcoxon_signed_rank`: Wilcoxon signed-rank test (zero differences dropped, average
  ranks for ties). Exact null distribution when n <= 25 and there are no ties, otherwise the
  normal approximation with tie correction and continuity correction (as scipy's ``wilcoxon``
  with ``zero_method="wilcox"``, ``correction=True``).
* :func:`paired_permutation_test`: sign-flip permutation test of the mean difference; exact
  enumeration for n <= 16, otherwise a seeded Monte Carlo with ``n_perm`` flips.
* Effect sizes: matched-pairs rank-biserial correlation and Cohen's d_z.

All p-values are two-sided.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EXACT_WILCOXON_MAX_N = 25
EXACT_PERMUTATION_MAX_N = 16


@dataclass(frozen=True)
class WilcoxonResult:
    statistic: float  # min(W+, W-)
    w_plus: float
    w_minus: float
    p: float
    n: int  # non-zero differences used
    method: str  # "exact" | "normal" | "none"
    rank_biserial: float  # (W+ - W-) / (W+ + W-); +1 = every difference positive


@dataclass(frozen=True)
class PermutationResult:
    mean_diff: float
    p: float
    n: int
    method: str  # "exact" | "monte-carlo" | "none"
    n_perm: int


def _signed_rank_counts(n: int) -> np.ndarray:
    """Number of subsets of {1..n} summing to w, for w = 0..n(n+1)/2 (the exact null of W+)."""
    total = n * (n + 1) // 2
    counts = np.zeros(total + 1, dtype=float)
    counts[0] = 1.0
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    return counts


def wilcoxon_signed_rank(diffs: Sequence[float]) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test of paired differences ``diffs`` (a - b)."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    d = d[d != 0.0]
    n = int(d.size)
    if n == 0:
        return WilcoxonResult(float("nan"), 0.0, 0.0, 1.0, 0, "none", 0.0)
    from scipy.stats import norm, rankdata  # imported on first use: scipy.stats costs seconds to import

    ranks = rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    total = n * (n + 1) / 2.0
    r_rb = (w_plus - w_minus) / total
    stat = min(w_plus, w_minus)
    has_ties = len(np.unique(np.abs(d))) < n
    if n <= EXACT_WILCOXON_MAX_N and not has_ties:
        counts = _signed_rank_counts(n)
        probs = counts / counts.sum()
        w = int(round(w_plus))
        cdf = float(probs[: w + 1].sum())
        sf = float(probs[w:].sum())
        p = min(1.0, 2.0 * min(cdf, sf))
        return WilcoxonResult(stat, w_plus, w_minus, p, n, "exact", r_rb)
    mean = n * (n + 1) / 4.0
    _, tie_counts = np.unique(ranks, return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((tie_counts**3 - tie_counts).sum()) / 48.0
    if var <= 0:
        return WilcoxonResult(stat, w_plus, w_minus, 1.0, n, "normal", r_rb)
    z = (abs(w_plus - mean) - 0.5) / math.sqrt(var)
    p = min(1.0, float(2.0 * norm.sf(max(z, 0.0))))
    return WilcoxonResult(stat, w_plus, w_minus, p, n, "normal", r_rb)


def paired_permutation_test(diffs: Sequence[float], *, n_perm: int = 10000, seed: int = 0) -> PermutationResult:
    """Two-sided sign-flip permutation test of mean(diffs) = 0."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    n = int(d.size)
    if n == 0:
        return PermutationResult(float("nan"), 1.0, 0, "none", 0)
    obs = float(d.mean())
    if np.all(d == 0):
        return PermutationResult(obs, 1.0, n, "exact", 1)
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        stats = signs @ d / n
        p = float(np.mean(np.abs(stats) >= abs(obs) - tol))
        return PermutationResult(obs, p, n, "exact", int(signs.shape[0]))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(n_perm, n))
    stats = signs @ d / n
    hits = int(np.sum(np.abs(stats) >= abs(obs) - tol))
    p = (hits + 1) / (n_perm + 1)
    return PermutationResult(obs, float(p), n, "monte-carlo", n_perm)


def cohens_dz(diffs: Sequence[float]) -> float:
    """Standardised mean difference of paired data: mean(d) / sd(d) (NaN when undefined)."""
    d = np.asarray(diffs, dtype=float)
    d = d[~np.isnan(d)]
    if d.size < 2:
        return float("nan")
    sd = float(d.std(ddof=1))
    if sd <= 1e-12 * max(1.0, float(np.abs(d).max())):  # constant differences (up to rounding)
        return float("nan") if float(d.mean()) == 0.0 else math.copysign(math.inf, float(d.mean()))
    return float(d.mean()) / sd


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given; NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.where(~np.isnan(p))[0]
    m = ok.size
    if m == 0:
        return out.tolist()
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for i, idx in enumerate(order):
        adj = min(1.0, (m - i) * p[idx])
        running = max(running, adj)
        out[idx] = running
    return out.tolist()


def significance_mark(p: float | None) -> str:
    """'***' p<0.001, '**' p<0.01, '*' p<0.05, '' otherwise (Holm-adjusted p expected)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    if p < 0.001:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""
