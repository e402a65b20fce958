"""Per-group estimates (mean, n, cluster-bootstrap 95% interval) from a units table.

``units`` is the long table of :mod:`mascot_eval.runs.tables` (columns label, split, task,
measure, judge, cluster, value ...). Each group is resampled by its clusters (contexts), so
agents nested inside one dialogue, or several profiles on one context, count as one unit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..fileio import stable_hash
from .bootstrap import bootstrap_mean

ESTIMATE_COLUMNS = ["mean", "lo", "hi", "n", "n_obs", "std"]


def describe(
    units: pd.DataFrame,
    by: Sequence[str] = ("label", "split", "measure", "judge"),
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per group in ``by`` with mean, lo, hi (95% percentile bootstrap), n clusters, n_obs, std.

    The bootstrap seed of each group is ``seed`` mixed with the group key, so every number is
    reproducible and independent of which other groups are present.
    """
    by = list(by)
    if units.empty:
        return pd.DataFrame(columns=by + ESTIMATE_COLUMNS)
    rows = []
    for key, g in units.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        group_seed = int(stable_hash([seed, *map(str, key)], 8), 16)
        est = bootstrap_mean(g["value"].to_numpy(float), g["cluster"].tolist(), n_boot=n_boot, seed=group_seed)
        rows.append({**dict(zip(by, key)), **est.to_dict()})
    return pd.DataFrame(rows, columns=by + ESTIMATE_COLUMNS)
