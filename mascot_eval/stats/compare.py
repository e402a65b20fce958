"""Paired comparisons between systems on the contexts they share.

For two systems (labels) a and b and one measure, each shared ``pair_key`` (task, context, user
profile) gives one paired difference a - b of dialogue-level values (agent-level scores are first
averaged over the dialogue's agents). The differences are tested with the Wilcoxon signed-rank
test (default) or the sign-flip permutation test; p-values are Holm-corrected within a family
(by default all comparisons of one split); effect sizes are the matched-pairs rank-biserial
correlation and Cohen's d_z; the mean difference gets a bootstrap interval over contexts.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..fileio import stable_hash
from .bootstrap import bootstrap_mean
from .paired import cohens_dz, holm, paired_permutation_test, wilcoxon_signed_rank

TESTS = ("wilcoxon", "permutation")
COMPARE_COLUMNS = [
    "split",
    "measure",
    "a",
    "b",
    "n_pairs",
    "mean_a",
    "mean_b",
    "mean_diff",
    "diff_lo",
    "diff_hi",
    "wilcoxon_stat",
    "wilcoxon_p",
    "wilcoxon_method",
    "perm_p",
    "perm_method",
    "rank_biserial",
    "cohen_dz",
    "test",
    "p",
    "p_holm",
]


def dialogue_values(units: pd.DataFrame, judge: str = "all") -> pd.DataFrame:
    """Mean per (label, split, measure, pair_key, cluster): one value per dialogue."""
    u = units[units["judge"] == judge]
    return u.groupby(["label", "split", "measure", "pair_key", "cluster"], as_index=False, sort=False)["value"].mean()


def paired_frame(dv: pd.DataFrame, a: str, b: str, measure: str, split: str | None = None) -> pd.DataFrame:
    """Columns pair_key, cluster, a, b for the pair keys both labels have."""
    sel = dv[dv["measure"] == measure]
    if split is not None:
        sel = sel[sel["split"] == split]
    va = sel[sel["label"] == a].set_index("pair_key")
    vb = sel[sel["label"] == b].set_index("pair_key")
    shared = va.index.intersection(vb.index)
    return pd.DataFrame(
        {
            "pair_key": shared,
            "cluster": va.loc[shared, "cluster"].to_numpy(),
            "a": va.loc[shared, "value"].to_numpy(float),
            "b": vb.loc[shared, "value"].to_numpy(float),
        }
    )


def compare_pair(pf: pd.DataFrame, *, test: str = "wilcoxon", n_boot: int = 2000, seed: int = 0) -> dict:
    """Statistics of one paired frame (columns a, b, cluster)."""
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}")
    d = (pf["a"] - pf["b"]).to_numpy(float)
    w = wilcoxon_signed_rank(d)
    perm = paired_permutation_test(d, seed=seed)
    est = bootstrap_mean(d, pf["cluster"].tolist(), n_boot=n_boot, seed=seed) if d.size else None
    return {
        "n_pairs": int(d.size),
        "mean_a": float(pf["a"].mean()) if d.size else float("nan"),
        "mean_b": float(pf["b"].mean()) if d.size else float("nan"),
        "mean_diff": float(d.mean()) if d.size else float("nan"),
        "diff_lo": est.lo if est else float("nan"),
        "diff_hi": est.hi if est else float("nan"),
        "wilcoxon_stat": w.statistic,
        "wilcoxon_p": w.p,
        "wilcoxon_method": w.method,
        "perm_p": perm.p,
        "perm_method": perm.method,
        "rank_biserial": w.rank_biserial,
        "cohen_dz": cohens_dz(d),
        "test": test,
        "p": w.p if test == "wilcoxon" else perm.p,
    }


def compare_systems(
    units: pd.DataFrame,
    *,
    reference: str | None = None,
    labels: Sequence[str] | None = None,
    measures: Sequence[str] | None = None,
    test: str = "wilcoxon",
    family: Sequence[str] = ("split",),
    judge: str = "all",
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Paired comparisons per split and measure: reference vs every other label, or all pairs.

    Pairs with no shared contexts are left out. ``p_holm`` is Holm-adjusted within ``family``.
    """
    if units.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    dv = dialogue_values(units, judge)
    labels = list(labels) if labels is not None else sorted(dv["label"].unique())
    if reference is not None:
        pairs = [(reference, x) for x in labels if x != reference]
    else:
        pairs = list(itertools.combinations(labels, 2))
    measures = list(measures) if measures is not None else sorted(dv["measure"].unique())
    rows = []
    for split in sorted(dv["split"].unique()):
        for a, b in pairs:
            for m in measures:
                pf = paired_frame(dv, a, b, m, split)
                if pf.empty:
                    continue
                s = int(stable_hash([seed, split, a, b, m], 8), 16)
                rows.append({"split": split, "measure": m, "a": a, "b": b, **compare_pair(pf, test=test, n_boot=n_boot, seed=s)})
    out = pd.DataFrame(rows, columns=[c for c in COMPARE_COLUMNS if c != "p_holm"])
    out["p_holm"] = np.nan
    if out.empty:
        return out
    for _, idx in out.groupby(list(family), sort=False).groups.items():
        out.loc[idx, "p_holm"] = holm(out.loc[idx, "p"].tolist())
    return out
