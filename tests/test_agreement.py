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
            out.append({
                "dialogue_id": f"demo:c{i}:-:sys{i % 2}", "pair_key": f"demo:c{i}:-", "system": f"sys{i % 2}",
                "judge": judge, "level": level, "agent": None, "criterion": c,
                "score": float(s) if ok else None, "status": "scored" if ok else "unscored",
                "reason": None if ok else "parse_failed: x",
            })
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


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_bootstrap_alpha_formula_matches_package(level):
    """The coincidence-matrix alpha used for bootstrap replicates equals the krippendorff package."""
    import krippendorff

    from mascot_eval.judges.agreement import _alpha_from_coincidence, _coincidences

    rng = np.random.default_rng(7)
    for _ in range(5):
        m = rng.integers(1, 6, size=(3, 30)).astype(float)
        m[rng.random(m.shape) < 0.15] = np.nan
        m = m[:, (~np.isnan(m)).sum(axis=0) >= 2]
        o, values = _coincidences(m)
        assert _alpha_from_coincidence(o.sum(axis=0), values, level) == pytest.approx(
            krippendorff.alpha(reliability_data=m, level_of_measurement=level), abs=1e-9
        )
