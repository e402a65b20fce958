"""Power of a non-inferiority gate (:mod:`mascot_eval.stats.noninferiority`) and the sample size it needs.

With per-context standard deviation ``sd`` of the paired difference, ``n`` contexts and one-sided
level ``alpha`` per bound, the half-width of a bound is ``t(1 - alpha, n - 1) * sd / sqrt(n)``. The
**minimum detectable drop** (MDD) at power ``p`` is

    MDD(n) = (t(1 - alpha, n - 1) + t(p, n - 1)) * sd / sqrt(n)

(the usual approximation to the non-central t): a candidate that is really as good as the baseline
PASSes with probability >= p only if the margin is at least MDD, and a candidate that really dropped
by margin + MDD FAILs with probability >= p. A gate with MDD > margin cannot tell "no change" from
"dropped by twice the margin" reliably; it says so on its first line.

Judge noise. When every unit was scored by several judge calls (J of them), the per-context variance
splits into the part between contexts and the judges' part: ``sd(J)^2 = var_between + var_call / J``,
with ``var_call`` the mean over contexts of the variance of the per-judge context differences
(:func:`judge_split`). The plan then says how the needed contexts change with more judge calls.

The pilot's sd is itself an estimate (from n_pilot contexts its relative standard error is about
1/sqrt(2 (n_pilot - 1))): sized on the point estimate, a gate reaches MDD <= margin only about half the
time. The plan therefore sizes on the one-sided upper confidence bound of sd at the chosen
**assurance** (:func:`sd_upper`, chi-square on n_pilot - 1 degrees of freedom; Browne 1995): with
assurance 0.8, a gate of the planned size has MDD <= margin with probability about 0.8 when the
pilot's contexts are like the gate's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import chi2
from scipy.stats import t as student_t

from .noninferiority import min_contexts, t_crit

MAX_CONTEXTS = 1_000_000


def mdd(sd: float, n: int, alpha: float, power: float) -> float:
    """Minimum detectable drop at ``n`` contexts (inf below two contexts or without a variance)."""
    if n < 2 or not math.isfinite(sd):
        return math.inf
    return (t_crit(alpha, n) + float(student_t.ppf(power, n - 1))) * sd / math.sqrt(n)


def sd_upper(sd: float, n: int, assurance: float) -> float:
    """One-sided upper confidence bound at level ``assurance`` of a standard deviation estimated from
    ``n`` independent units: sd x sqrt((n - 1) / chi2.ppf(1 - assurance, n - 1)). inf below two units."""
    if n < 2 or not math.isfinite(sd):
        return math.inf
    return sd * math.sqrt((n - 1) / float(chi2.ppf(1.0 - assurance, n - 1)))


def contexts_needed(sd: float, distance: float, alpha: float, power: float) -> int | None:
    """Fewest contexts whose MDD is at most ``distance`` (the true difference's distance from the margin:
    the margin itself for a candidate as good as the baseline) and at least :func:`min_contexts`.
    None when no number of contexts can do it (distance <= 0, or more than a million)."""
    if not math.isfinite(sd) or distance <= 0:
        return None
    lo = min_contexts(alpha)
    if mdd(sd, lo, alpha, power) <= distance:
        return lo
    hi = lo
    while mdd(sd, hi, alpha, power) > distance:
        hi *= 2
        if hi > MAX_CONTEXTS:
            return None
    while hi - lo > 1:  # MDD falls with n: smallest n with MDD <= distance in (lo, hi]
        mid = (lo + hi) // 2
        if mdd(sd, mid, alpha, power) <= distance:
            hi = mid
        else:
            lo = mid
    return hi


def contexts_to_decide(diff: float, sd: float, margin: float, alpha: float, power: float) -> int | None:
    """If the observed oriented difference were the truth: contexts for a PASS (diff > -margin) or a
    FAIL (diff < -margin) with probability ``power``."""
    return contexts_needed(sd, abs(diff + margin), alpha, power)


def judge_split(per_judge: Sequence[Sequence[float]]) -> tuple[float, float, int]:
    """(var_between, var_call, J) from per-context lists of per-judge paired differences (one list per
    context, one value per judge call). var_call is the mean within-context variance across calls;
    var_between = var(context means) - var_call / J, floored at 0."""
    rows = [np.asarray(r, dtype=float) for r in per_judge if len(r) >= 2]
    if len(rows) < 2:
        return float("nan"), float("nan"), 1
    j = int(round(float(np.mean([r.size for r in rows]))))
    var_call = float(np.mean([r.var(ddof=1) for r in rows]))
    means = np.array([r.mean() for r in rows])
    var_between = max(float(means.var(ddof=1)) - var_call / j, 0.0)
    return var_between, var_call, j
