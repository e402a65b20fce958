"""Krippendorff's alpha vs hand-computed values and nltk; agreement table; panel means; human agreement."""

from __future__ import annotations

import numpy as np
import pytest

from mascot_eval.criteria import GROUP_CRITERIA
from mascot_eval.judges.agreement import agreement_table, human_agreement, krippendorff_alpha, panel_scores


def test_alpha_hand_computed():
    # raters x items; by hand (coincidence matrix, n=6; n_1=2, n_2=1, n_3=3):
    # interval: D_o = 2/6, D_e = 58/30 -> alpha = 1 - 10/58 = 48/58
    # ordinal:  d(1,2)=1.5^2, d(2,3)=2^2, d(1,3)=3.5^2 -> D_o = 8/6, D_e = 180/30 -> alpha = 7/9
    m = np.array([[1, 2, 3], [1, 3, 3]], dtype=float)
    assert krippendorff_alpha(m, "interval", n_boot=50)[0] == pytest.approx(48 / 58)
    assert krippendorff_alpha(m, "ordinal", n_boot=50)[0] == pytest.approx(7 / 9)


def test_alpha_matches_nltk_with_missing_values():
    from nltk.metrics.agreement import AnnotationTask
    from nltk.metrics.distance import interval_distance

    rng = np.random.default_rng(3)
    truth = rng.integers(1, 6, size=25)
    m = np.vstack([np.clip(truth + rng.integers(-1, 2, size=25), 1, 5) for _ in range(3)]).astype(float)
    m[0, 3] = m[1, 7] = m[2, 11] = np.nan
    data = [(f"r{r}", f"i{i}", float(m[r, i])) for r in range(3) for i in range(25) if not np.isnan(m[r, i])]
    ref = AnnotationTask(data=data, distance=interval_distance).alpha()
    value, lo, hi, n = krippendorff_alpha(m, "interval", n_boot=200)
    assert value == pytest.approx(ref, abs=1e-9)
    assert lo <= value <= hi and n == 25


def test_alpha_undefined_without_variation_is_nan_not_one():
    v, lo, hi, n = krippendorff_alpha(np.array([[3, 3, 3], [3, 3, 3]], dtype=float), "interval", n_boot=20)
    assert np.isnan(v) and n == 3


def _rows(judge, scores, level="group", status=None):
    out = []
    for i, s in enumerate(scores):
        for c in GROUP_CRITERIA:
            ok = s is not None
            out.append(
                {
                    "dialogue_id": f"demo:c{i}:-:sys{i % 2}",
                    "pair_key": f"demo:c{i}:-",
                    "system": f"sys{i % 2}",
                    "judge": judge,
                    "level": level,
                    "agent": None,
                    "criterion": c,
                    "score": float(s) if ok else None,
                    "status": "scored" if ok else "unscored",
                    "reason": None if ok else "parse_failed: x",
                }
            )
    return out


def test_agreement_table_long_format():
    a = [1, 2, 3, 4, 5, 3, 2, 4]
    b = [1, 2, 3, 4, 4, 3, 2, 5]
    c = [2, 2, 3, None, 5, 3, 1, 4]
    rows = _rows("gpt", a) + _rows("claude", b) + _rows("local", c)
    t = agreement_table(rows, n_boot=100)
    fid = t[(t.level == "group") & (t.criterion == "fidelity")]
    assert set(fid.statistic) == {"alpha_ordinal", "alpha_interval", "spearman"}
    ai = fid[fid.statistic == "alpha_interval"].iloc[0]
    m = np.array([a, b, [np.nan if x is None else x for x in c]], dtype=float)
    # judges are sorted by name in the table (claude, gpt, local); alpha does not depend on rater order
    assert ai.value == pytest.approx(krippendorff_alpha(m, "interval", n_boot=10)[0])
    assert ai.n_items == 8 and ai.n_judges == 3
    sp = fid[fid.judges == "claude~gpt"].iloc[0]
    from scipy.stats import spearmanr

    assert sp.value == pytest.approx(spearmanr(a, b).statistic) and sp.n_items == 8
    assert (t.criterion == "overall").any()  # mean of criteria per item and judge


def test_panel_scores_count_unscored_and_never_zero():
    rows = _rows("gpt", [5, 5, None, 5]) + _rows("local", [1, None, 1, 1])
    p = panel_scores(rows, n_boot=50)
    g = p[(p.system == "sys0") & (p.criterion == "fidelity")].set_index("judge")
    assert g.loc["gpt", "mean"] == 100.0 and g.loc["gpt", "unscored"] == 1 and g.loc["gpt", "n_obs"] == 1
    assert g.loc["local", "mean"] == 0.0 and g.loc["local", "n_obs"] == 2
    # panel: item c0 -> mean(100, 0) = 50, item c2 -> local only -> 0
    assert g.loc["panel", "mean"] == pytest.approx(25.0) and g.loc["panel", "unscored"] == 1


def test_human_agreement():
    h1 = _rows("human:ann1", [1, 2, 3, 4, 5, 3])
    h2 = _rows("human:ann2", [1, 2, 4, 4, 5, 2])
    judge = _rows("gpt", [2, 2, 3, 4, 5, 3])
    t = human_agreement(judge, h1 + h2, n_boot=50)
    assert (t.judges == "humans:human:ann1,human:ann2").any()
    row = t[(t.judges == "gpt~humans") & (t.statistic == "spearman") & (t.criterion == "fidelity")].iloc[0]
    from scipy.stats import spearmanr

    assert row.value == pytest.approx(spearmanr([2, 2, 3, 4, 5, 3], [1, 2, 3.5, 4, 5, 2.5]).statistic)


def _matrix(rng, raters, items, values, missing=0.15):
    m = rng.choice(values, size=(raters, items)).astype(float)
    m[rng.random(m.shape) < missing] = np.nan
    return m


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_equals_krippendorff_package(level):
    """Point values equal the package on integer and fractional ratings, 2-5 raters, missing values
    (items with fewer than two ratings included: they are not pairable and drop out)."""
    import krippendorff

    rng = np.random.default_rng(7)
    domains = [np.arange(1, 6), np.arange(1, 6), np.array([1.0, 1.5, 2.0, 3.25, 4.0, 5.0]), np.arange(0, 40) / 4.0]
    for raters, items, values in [(2, 20, domains[0]), (3, 30, domains[1]), (4, 25, domains[2]), (5, 60, domains[3])]:
        m = _matrix(rng, raters, items, values)
        want = krippendorff.alpha(reliability_data=m, level_of_measurement=level)
        assert krippendorff_alpha(m, level, n_boot=0)[0] == pytest.approx(want, abs=1e-10)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_bootstrap_replicates_equal_the_package_on_resampled_items(level):
    """Each bootstrap replicate equals the package run on that replicate's resampled items
    (the naive loop), so the interval is the package's percentile interval."""
    import krippendorff

    from mascot_eval.judges.agreement import _replicate_items

    rng = np.random.default_rng(3)
    m = _matrix(rng, 3, 25, np.arange(1, 6))
    m = m[:, (~np.isnan(m)).sum(axis=0) >= 2]
    value, lo, hi, n = krippendorff_alpha(m, level, n_boot=40, seed=5)
    naive = []
    for idx in np.concatenate(list(_replicate_items(m.shape[1], 40, seed=5, chunk=7))):
        r = m[:, idx]
        vals = r[~np.isnan(r)]
        naive.append(np.nan if np.unique(vals).size < 2 else krippendorff.alpha(reliability_data=r, level_of_measurement=level))
    naive = np.asarray(naive)
    naive = naive[~np.isnan(naive)]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(naive, [0.025, 0.975])), abs=1e-10)
    assert n == m.shape[1] and lo <= value <= hi


def _direct_alpha(m: np.ndarray, level: str) -> float:
    """Krippendorff's alpha straight from its definition, one value pair at a time (O(n^2))."""
    units = [col[~np.isnan(col)] for col in m.T]
    units = [u for u in units if len(u) >= 2]
    pooled = np.concatenate(units)
    if level == "ordinal":  # the ordinal distance is the squared distance of mid-ranks in the pooled values
        from scipy.stats import rankdata

        ranks = rankdata(pooled)
        lookup = dict(zip(pooled.tolist(), ranks.tolist()))
        units = [np.array([lookup[v] for v in u.tolist()]) for u in units]
        pooled = ranks
    n = len(pooled)
    d_o = sum(float(((u[:, None] - u[None, :]) ** 2).sum()) / (len(u) - 1) for u in units) / n
    d_e = sum(float(((pooled[i] - pooled) ** 2).sum()) for i in range(n)) / (n * (n - 1))
    return 1.0 - d_o / d_e


def test_alpha_continuous_ratings_against_nltk_and_the_definition():
    """Ratings with as many distinct values as ratings: interval alpha equals nltk's and the
    pair-by-pair definition; ordinal alpha equals the definition (mid-rank distances)."""
    from nltk.metrics.agreement import AnnotationTask
    from nltk.metrics.distance import interval_distance

    rng = np.random.default_rng(11)
    truth = rng.normal(50, 15, size=60)
    m = np.vstack([truth + rng.normal(0, 6, size=60) for _ in range(3)])
    m[0, 5] = m[2, 9] = np.nan
    assert np.unique(m[~np.isnan(m)]).size == 178
    data = [(f"r{r}", f"i{i}", float(m[r, i])) for r in range(3) for i in range(60) if not np.isnan(m[r, i])]
    ref = AnnotationTask(data=data, distance=interval_distance).alpha()
    assert krippendorff_alpha(m, "interval", n_boot=0)[0] == pytest.approx(ref, abs=1e-9)
    assert krippendorff_alpha(m, "interval", n_boot=0)[0] == pytest.approx(_direct_alpha(m, "interval"), abs=1e-10)
    assert krippendorff_alpha(m, "ordinal", n_boot=0)[0] == pytest.approx(_direct_alpha(m, "ordinal"), abs=1e-10)


def test_alpha_of_thousands_of_distinct_values_builds_no_value_pair_matrix():
    """6,000 distinct ratings: a values x values matrix alone would take 288 MB (the package and a
    per-item coincidence array need far more); alpha and a 200-replicate bootstrap stay small."""
    import tracemalloc

    rng = np.random.default_rng(2)
    truth = rng.normal(0, 1, size=2000)
    m = np.vstack([truth + rng.normal(0, 0.5, size=2000) for _ in range(3)])
    tracemalloc.start()
    try:
        res = {lvl: krippendorff_alpha(m, lvl, n_boot=200) for lvl in ("interval", "ordinal")}
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20
    sub = m[:, :150]  # the definition on a sample of the same data
    assert krippendorff_alpha(sub, "interval", n_boot=0)[0] == pytest.approx(_direct_alpha(sub, "interval"), abs=1e-10)
    for lvl, (v, lo, hi, n) in res.items():
        assert n == 2000 and lo <= v <= hi and 0.7 < v < 0.9, (lvl, v, lo, hi)


def test_alpha_refuses_an_unknown_level():
    with pytest.raises(ValueError, match="nominal, ordinal or interval"):
        krippendorff_alpha(np.array([[1.0, 2.0], [1.0, 3.0]]), "ratio")


def test_alpha_bootstrap_runs_with_one_blas_thread(monkeypatch):
    """The replicate products run with BLAS pinned to one thread (threads would only contend)."""
    from threadpoolctl import threadpool_info

    from mascot_eval.judges import agreement

    seen = []
    orig = agreement._AlphaItems.alpha

    def spy(self, level, weights):
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return orig(self, level, weights)

    monkeypatch.setattr(agreement._AlphaItems, "alpha", spy)
    krippendorff_alpha(np.array([[1, 2, 3, 4, 5], [1, 2, 3, 5, 5]], dtype=float), "interval", n_boot=20)
    assert seen[0] >= 1 and seen[1:] == [1] * (len(seen) - 1) and len(seen) >= 2
