"""Statistics against hand-computed values and scipy: the cluster bootstrap, per-group estimates,
the paired comparisons between systems on real unit tables, and Holm against its definition."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mascot_eval.runs.tables import load_runs
from mascot_eval.stats.bootstrap import bootstrap_mean
from mascot_eval.stats.compare import compare_systems
from mascot_eval.stats.describe import describe
from mascot_eval.stats.paired import holm
from tests.runfactory import build_run, noisy_scores


def test_cluster_bootstrap_hand_computed():
    # clusters a = [0, 0, 0] and b = [1]: replicates aa -> 0 (p 1/4), ab/ba -> 1/4 (p 1/2), bb -> 1 (p 1/4).
    # The estimator weights observations equally: point 1/4, not the mean of cluster means (1/2).
    vals, clusters = [0.0, 0.0, 0.0, 1.0], ["a", "a", "a", "b"]
    e = bootstrap_mean(vals, clusters, n_boot=4000, seed=3)
    assert (e.mean, e.n, e.n_obs) == (0.25, 2, 4)
    assert (e.lo, e.hi) == (0.0, 1.0)  # both tails hold 1/4 > 2.5%
    mid = bootstrap_mean(vals, clusters, n_boot=4000, seed=3, level=0.4)  # 30% and 70% quantiles fall in the 1/4 atom
    assert (mid.lo, mid.hi) == (0.25, 0.25)
    one = bootstrap_mean([1.0, 3.0], ["x", "x"])  # one cluster: no resampling possible
    assert (one.mean, one.lo, one.hi, one.n) == (2.0, 2.0, 2.0, 1)
    empty = bootstrap_mean([])
    assert empty.n == 0 and np.isnan(empty.mean)


def test_equal_clusters_match_scipy_bootstrap_of_cluster_means():
    # with equal cluster sizes, resampling clusters = resampling cluster means (scipy's percentile bootstrap)
    rng = np.random.default_rng(11)
    ctx = rng.normal(60, 10, size=30)
    vals = np.repeat(ctx, 3) + rng.normal(0, 4, size=90)  # 3 agents per dialogue around a context effect
    clusters = np.repeat(np.arange(30), 3)
    ours = bootstrap_mean(vals, clusters, n_boot=20000, seed=0)
    ref = stats.bootstrap(
        (vals.reshape(30, 3).mean(axis=1),),
        np.mean,
        method="percentile",
        n_resamples=20000,
        confidence_level=0.95,
        random_state=0,
    )
    se = ref.standard_error
    assert ours.mean == pytest.approx(vals.mean())
    assert abs(ours.lo - ref.confidence_interval.low) < 0.1 * se
    assert abs(ours.hi - ref.confidence_interval.high) < 0.1 * se
    # and the interval is about mean +- 1.96 SE of the cluster means (normal theory)
    se_theory = vals.reshape(30, 3).mean(axis=1).std(ddof=1) / np.sqrt(30)
    assert (ours.hi - ours.lo) == pytest.approx(2 * 1.96 * se_theory, rel=0.1)


def test_describe_per_group_is_reproducible_and_independent_of_other_groups():
    rng = np.random.default_rng(5)
    rows = [
        {"label": lab, "split": "in_domain", "measure": "agent.overall", "judge": "all", "cluster": f"t:{c}", "value": float(v)}
        for lab in ("a", "b")
        for c in range(8)
        for v in rng.normal(50, 5, size=3)
    ]
    units = pd.DataFrame(rows)
    both = describe(units, n_boot=500, seed=1).set_index("label")
    only_a = describe(units[units["label"] == "a"], n_boot=500, seed=1).set_index("label")
    assert both.loc["a"].to_dict() == only_a.loc["a"].to_dict()
    a = units[units["label"] == "a"]
    assert both.loc["a", "mean"] == pytest.approx(a["value"].mean())
    assert (both.loc["a", "n"], both.loc["a", "n_obs"]) == (8, 24)
    assert both.loc["a", "std"] == pytest.approx(a["value"].std(ddof=1))


def _dialogue_overall(path) -> dict[tuple[str, str], float]:
    """agent.overall per dialogue by hand: per agent the mean of its criteria (0-100), then the mean over agents."""
    per_agent: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["level"] == "agent" and r["status"] == "scored":
            per_agent[(r["system"], r["context_id"], r["agent"])].append((r["score"] - 1) / 4 * 100)
    per_dlg: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (system, ctx, _agent), v in per_agent.items():
        per_dlg[(system, ctx)].append(float(np.mean(v)))
    return {k: float(np.mean(v)) for k, v in per_dlg.items()}


def test_paired_comparison_on_units_matches_scipy(tmp_path):
    rd = build_run(
        tmp_path / "r",
        systems=["mascot", "zero-shot", "few-shot"],
        score=noisy_scores({"mascot": 0.3, "zero-shot": 0.0, "few-shot": 0.25}),
        n_contexts=12,
    )
    comps = compare_systems(load_runs([rd]).units, reference="mascot", n_boot=300)
    by_hand = _dialogue_overall(rd.judgments_path)
    for other in ("zero-shot", "few-shot"):
        d = np.array([by_hand[("mascot", f"c{i:03d}")] - by_hand[(other, f"c{i:03d}")] for i in range(12)])
        row = comps[(comps["measure"] == "agent.overall") & (comps["b"] == other)].iloc[0]
        assert row["n_pairs"] == 12 and row["mean_diff"] == pytest.approx(d.mean())
        nz = d[d != 0]
        ties = len(np.unique(np.abs(nz))) < len(nz)
        ref = stats.wilcoxon(nz, zero_method="wilcox", correction=True, method="approx" if ties else "exact")
        assert row["wilcoxon_p"] == pytest.approx(ref.pvalue, rel=1e-9)
        assert row["wilcoxon_method"] == ("normal" if ties else "exact")
        perm = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf)
        assert row["perm_p"] == pytest.approx(perm.pvalue, rel=1e-9)
        assert row["cohen_dz"] == pytest.approx(d.mean() / d.std(ddof=1))
        r_plus = stats.rankdata(np.abs(nz))
        assert row["rank_biserial"] == pytest.approx((r_plus[nz > 0].sum() - r_plus[nz < 0].sum()) / r_plus.sum())
    # Holm within the split: the family is every comparison row
    assert comps["p_holm"].tolist() == pytest.approx(holm(comps["p"].tolist()))


def _holm_by_definition(p: np.ndarray) -> np.ndarray:
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj_sorted = [max(min(1.0, (m - j) * p[order[j]]) for j in range(k + 1)) for k in range(m)]
    out = np.empty(m)
    out[order] = adj_sorted
    return out


@pytest.mark.parametrize("seed", range(4))
def test_holm_matches_its_definition_and_step_down_rejections(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 0.02, size=4), rng.uniform(0, 1, size=8)])
    adj = np.array(holm(p.tolist()))
    assert adj == pytest.approx(_holm_by_definition(p))
    # step-down at alpha: reject the sorted p's while p_(k) <= alpha / (m - k)
    alpha, m = 0.05, len(p)
    rejected = set()
    for k, i in enumerate(np.argsort(p)):
        if p[i] > alpha / (m - k):
            break
        rejected.add(int(i))
    assert rejected == {int(i) for i in np.where(adj <= alpha)[0]}
