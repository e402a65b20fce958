"""Paired tests, Holm and effect sizes against hand-computed values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mascot_eval.stats.bootstrap import bootstrap_mean
from mascot_eval.stats.paired import (
    cohens_dz,
    holm,
    paired_permutation_test,
    significance_mark,
    wilcoxon_signed_rank,
)


def test_wilcoxon_hand_computed_small():
    # d = [1, -2, 3, 4]: ranks of |d| = 1,2,3,4; W+ = 1+3+4 = 8, W- = 2.
    # Exact null of W+ for n=4: 16 sign patterns; P(W+ <= 2) = #{0,1,2} = {},{1},{2} -> 3/16.
    r = wilcoxon_signed_rank([1, -2, 3, 4])
    assert (r.w_plus, r.w_minus, r.statistic, r.n) == (8.0, 2.0, 2.0, 4)
    assert r.method == "exact"
    assert r.p == pytest.approx(2 * 3 / 16)
    assert r.rank_biserial == pytest.approx((8 - 2) / 10)


def test_wilcoxon_all_positive_exact_p():
    # n=5 all positive: P(W+ = 15) = 1/32, two-sided 2/32
    r = wilcoxon_signed_rank([0.5, 1.5, 2.5, 3.5, 4.5])
    assert r.p == pytest.approx(2 / 32)
    assert r.rank_biserial == 1.0


def test_wilcoxon_zeros_dropped_and_empty():
    r = wilcoxon_signed_rank([0, 0, 1, -2, 3, 4])
    assert r.n == 4 and r.p == pytest.approx(6 / 16)
    e = wilcoxon_signed_rank([0.0, 0.0])
    assert e.n == 0 and e.p == 1.0 and e.method == "none"


@pytest.mark.parametrize("seed", range(5))
def test_wilcoxon_exact_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.4, 1.0, size=15)
    ours = wilcoxon_signed_rank(d)
    ref = stats.wilcoxon(d, zero_method="wilcox", method="exact")
    assert ours.method == "exact"
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_wilcoxon_normal_with_ties_matches_scipy(seed):
    rng = np.random.default_rng(100 + seed)
    d = np.round(rng.normal(0.3, 1.0, size=40) * 2) / 2  # judge-like half points: many ties
    d = d[d != 0]
    ours = wilcoxon_signed_rank(d)
    ref = stats.wilcoxon(d, zero_method="wilcox", correction=True, method="approx")
    assert ours.method == "normal"
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-9)


def test_permutation_exact_hand_computed():
    # d = [1, 2, 3]: 8 sign patterns, means {2, 4/3, 2/3, 0, 0, -2/3, -4/3, -2}/...; |mean| >= 2 only for +++ and ---
    r = paired_permutation_test([1, 2, 3])
    assert r.method == "exact" and r.n_perm == 8
    assert r.p == pytest.approx(2 / 8)
    assert r.mean_diff == pytest.approx(2.0)


def test_permutation_exact_matches_scipy():
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, 10)
    y = x - rng.normal(0.5, 1, 10)
    ours = paired_permutation_test(x - y)
    ref = stats.permutation_test(
        (x, y), lambda a, b: np.mean(a - b), permutation_type="samples", alternative="two-sided", n_resamples=np.inf
    )
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-9)


def test_permutation_monte_carlo_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(3)
    d = rng.normal(0.3, 1, 30)
    a = paired_permutation_test(d, seed=1)
    b = paired_permutation_test(d, seed=1)
    assert a.method == "monte-carlo" and a.p == b.p
    # the normal-theory t-test p is a close reference for a mean-difference permutation test at n=30
    t_p = stats.ttest_1samp(d, 0).pvalue
    assert abs(a.p - t_p) < 0.03


def test_holm_hand_computed():
    # sorted p: .01 (x4 = .04), .02 (x3 = .06), .03 (x2 = .06 monotone), .04 (x1 = .06 monotone)
    assert holm([0.04, 0.01, 0.03, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    out = holm([float("nan"), 0.01, 0.04])
    assert math.isnan(out[0]) and out[1:] == pytest.approx([0.02, 0.04])


def test_cohens_dz_and_marks():
    assert cohens_dz([1, 2, 3]) == pytest.approx(2.0 / 1.0)
    assert math.isnan(cohens_dz([1]))
    assert significance_mark(0.0005) == "***" and significance_mark(0.004) == "**"
    assert significance_mark(0.04) == "*" and significance_mark(0.2) == "" and significance_mark(float("nan")) == ""


def test_cluster_bootstrap_counts_contexts_not_agents():
    # 3 agents per dialogue, 10 dialogues: n = 10 clusters, n_obs = 30
    vals = np.repeat(np.arange(10, dtype=float), 3)
    clusters = np.repeat(np.arange(10), 3)
    e = bootstrap_mean(vals, clusters, seed=0)
    assert (e.n, e.n_obs) == (10, 30) and e.mean == pytest.approx(4.5)
    naive = bootstrap_mean(vals, seed=0)
    # treating agents as independent understates the uncertainty
    assert (e.hi - e.lo) > (naive.hi - naive.lo)
    assert bootstrap_mean(vals, clusters, seed=0) == e  # reproducible
