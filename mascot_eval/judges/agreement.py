"""Agreement between judges (and with human raters) per level and criterion.

Items are what a judge scores once: (dialogue, agent) at the agent level, the dialogue at the
group level. Statistics, each with a percentile bootstrap interval over items and its n:

- Krippendorff's alpha, ordinal and interval (equal to the ``krippendorff`` package, computed from
  per-item sums so continuous ratings need no values x values matrix; missing scores allowed),
- pairwise Spearman correlations between judges (scipy).

Only *scored* rows enter; unscored ones are missing values, never zeros. ``overall`` is the mean of
a level's criteria for items where a judge scored every criterion.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from ..criteria import criteria_for
from ..stats.bootstrap import bootstrap_mean, one_blas_thread
from .run import latest_judgments

COLUMNS = ["level", "criterion", "statistic", "judges", "value", "lo", "hi", "n_items", "n_judges"]


def scored_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Scored rows as a frame with an ``item`` column; ``overall`` rows added per judge and item."""
    rows = [r for r in latest_judgments(rows) if r.get("status") == "scored" and r.get("score") is not None]
    cols = ["dialogue_id", "pair_key", "system", "judge", "level", "agent", "criterion", "score"]
    if not rows:
        return pd.DataFrame(columns=[*cols, "item"])
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows])
    df["score"] = df["score"].astype(float)
    df["item"] = df["dialogue_id"].astype(str) + "|" + df["agent"].fillna("").astype(str)
    parts = [df]
    for level, g in df.groupby("level"):
        need = len(criteria_for(str(level)))
        agg = g.groupby(["judge", "item", "dialogue_id", "pair_key", "system", "agent"], dropna=False)["score"].agg(
            ["mean", "count"]
        )
        agg = agg[agg["count"] == need].reset_index()
        if len(agg):
            parts.append(agg.assign(level=level, criterion="overall", score=agg["mean"]).drop(columns=["mean", "count"]))
    return pd.concat(parts, ignore_index=True)


LEVELS = ("nominal", "ordinal", "interval")
_CHUNK = 1 << 16  # replicates x (items or values) handled at once: bounded memory, arrays stay in cache


def _replicate_items(n_items: int, n_boot: int, seed: int, chunk: int | None = None) -> Iterator[np.ndarray]:
    """The resampled item indices of the bootstrap replicates, ``chunk`` replicates (rows) at a time.

    One generator draws n_items indices per replicate in replicate order, so the replicates do
    not depend on the chunk size."""
    rng = np.random.default_rng(seed)
    step = chunk or n_boot
    for start in range(0, n_boot, step):
        yield rng.integers(0, n_items, size=(min(step, n_boot - start), n_items))


class _AlphaItems:
    """The pairable items of a raters x items matrix, reduced once to the per-item totals that
    Krippendorff's alpha needs; :meth:`alpha` then takes any item weights (a replicate that draws
    item u w times has weight w) for many replicates at once.

    No values x values (coincidence) matrix is built: with D_o = 1/n sum_u 1/(m_u - 1) sum_{i != j in u}
    delta and D_e = 1/(n (n - 1)) sum_{i != j} delta over all n pairable values (Krippendorff 2011),
    the squared-difference metric gives sum_{i != j} (v_i - v_j)^2 = 2 m sum (v - mean)^2 for any
    m values, so each sum is a weighted sum of per-item totals: one matrix product of the
    replicate weights with those totals. The ordinal metric is the squared difference of mid-ranks
    in the pooled values (sum of n_g from c to k minus (n_c + n_k) / 2 = midrank(k) - midrank(c)),
    i.e. the interval formula on mid-ranks, re-ranked per replicate from its weighted value counts;
    nominal uses sum_{i != j} [v_i != v_j] = m^2 - sum_c m_c^2. Memory grows with replicates x
    (items + distinct values), never with distinct values squared.
    """

    def __init__(self, m: np.ndarray) -> None:
        import scipy.sparse as sp

        ok = ~np.isnan(m)
        item, _ = np.nonzero(ok.T)  # pairable values, item by item
        vals = m.T[ok.T]
        self.values, cls = np.unique(vals, return_inverse=True)
        self.n_items = n_items = m.shape[1]
        self.per_item = per_item = ok.sum(axis=0).astype(float)
        counts = sp.csr_matrix((np.ones(len(vals)), (item, cls)), shape=(n_items, self.values.size))
        counts.sum_duplicates()
        self.counts = counts  # items x values
        self.counts_t = counts.T.tocsr()
        # nominal: sum over ordered pairs of unequal values within an item, / (m_u - 1)
        nominal = (per_item**2 - np.asarray(counts.multiply(counts).sum(axis=1)).ravel()) / (per_item - 1)
        # interval: centred values (no precision lost to a large mean), their per-item sums and the
        # within-item sum of squared differences over ordered pairs, / (m_u - 1)
        v = vals - vals.mean()
        s1 = np.bincount(item, weights=v, minlength=n_items)
        dev = v - (s1 / per_item)[item]
        within = 2.0 * per_item * np.bincount(item, weights=dev * dev, minlength=n_items) / (per_item - 1)
        s2 = np.bincount(item, weights=v * v, minlength=n_items)
        self.totals = np.column_stack([per_item, nominal, within, s1, s2])  # items x 5

    def alpha(self, level: str, weights: np.ndarray) -> np.ndarray:
        """Alpha for each row of ``weights`` (replicates x items); NaN where the values do not vary."""
        w = np.asarray(weights, dtype=float)
        n, nominal, within, t1, t2 = (w @ self.totals).T  # the one product over items
        nc = np.asarray(self.counts_t @ w.T).T  # replicates x values: weighted count of each value
        with np.errstate(divide="ignore", invalid="ignore"):
            if level == "nominal":
                d_o = nominal / n
                d_e = (n**2 - (nc**2).sum(axis=1)) / (n * (n - 1))
            elif level == "interval":
                d_o = within / n
                d_e = 2.0 * (n * t2 - t1 * t1) / (n * (n - 1))
            elif level == "ordinal":
                rank = np.cumsum(nc, axis=1) - nc / 2.0  # mid-rank of each value, up to a constant; exact halves
                r1 = np.asarray(self.counts @ rank.T).T  # replicates x items: sums of an item's mid-ranks
                r2 = np.asarray(self.counts @ (rank * rank).T).T
                d_o = (w * (2.0 * (self.per_item * r2 - r1 * r1) / (self.per_item - 1))).sum(axis=1) / n
                u1, u2 = (nc * rank).sum(axis=1), (nc * rank * rank).sum(axis=1)
                d_e = 2.0 * (n * u2 - u1 * u1) / (n * (n - 1))
            else:
                raise ValueError(f"alpha level '{level}': use nominal, ordinal or interval")
            out = 1.0 - d_o / d_e
        varies = (nc > 0).sum(axis=1) >= 2
        out[~varies | ~(n > 1) | ~(d_e > 0)] = np.nan
        return out


def krippendorff_alpha(
    matrix: np.ndarray, level: str = "interval", *, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float, int]:
    """Alpha of a raters x items matrix (NaN = missing) with a bootstrap CI over items; n = pairable items.

    ``level``: nominal, ordinal or interval. Values equal the ``krippendorff`` package (tested), for
    any number of distinct values (continuous ratings included): no values x values matrix is built
    (see :class:`_AlphaItems`). Replicates resample items with replacement; all of them are one
    matrix product of replicate weights with per-item sums (in chunks of replicates, with one BLAS
    thread), not a loop over replicates.
    Undefined replicates (no variation) are dropped; alpha without variation is NaN, never 1.
    """
    if level not in LEVELS:
        raise ValueError(f"alpha level '{level}': use nominal, ordinal or interval")
    matrix = np.asarray(matrix, dtype=float)
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    m = matrix[:, pairable]
    n = int(m.shape[1])
    if n < 2:
        return float("nan"), float("nan"), float("nan"), n
    with one_blas_thread():  # small products: BLAS threads would cost more than they compute
        items = _AlphaItems(m)
        point = float(items.alpha(level, np.ones((1, n)))[0])
        if point != point or n_boot <= 0:
            return point, float("nan"), float("nan"), n
        step = max(1, _CHUNK // max(n, items.values.size))
        # buffers reused across chunks: fresh multi-megabyte arrays cost more in page faults than the sums
        offset = (np.arange(step) * n)[:, None]  # replicate b of a chunk counts into row b
        counts = np.zeros(step * n, dtype=np.int64)
        weights = np.empty((step, n))
        reps = []
        for part in _replicate_items(n, n_boot, seed, chunk=step):
            k = len(part)
            part += offset[:k]
            counts[: k * n] = 0
            np.add.at(counts, part.ravel(), 1)
            np.copyto(weights[:k], counts[: k * n].reshape(k, n))
            reps.append(items.alpha(level, weights[:k]))
    r = np.concatenate(reps)
    r = r[~np.isnan(r)]
    if r.size == 0:
        return point, float("nan"), float("nan"), n
    lo, hi = np.quantile(r, [0.025, 0.975])
    return point, float(lo), float(hi), n


def spearman(x: np.ndarray, y: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float, int]:
    """Spearman's rho (scipy) with a vectorised percentile bootstrap over items."""
    from scipy.stats import rankdata

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    n = int(x.size)
    if n < 3:
        return float("nan"), float("nan"), float("nan"), n
    point = _spearman(x, y)
    if point != point:
        return point, float("nan"), float("nan"), n
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    rx, ry = rankdata(x[idx], axis=1), rankdata(y[idx], axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = (rx * ry).sum(axis=1) / den
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return point, float("nan"), float("nan"), n
    lo, hi = np.quantile(reps, [0.025, 0.975])
    return point, float(lo), float(hi), n


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.unique(x).size < 2 or np.unique(y).size < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def _row(level, criterion, statistic, judges, value, lo, hi, n_items, n_judges) -> dict[str, Any]:
    return dict(zip(COLUMNS, (level, criterion, statistic, judges, value, lo, hi, n_items, n_judges)))


def agreement_table(rows: Iterable[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per level x criterion (+ overall): alpha ordinal/interval over all judges and Spearman per pair.

    Long format: columns level, criterion, statistic (alpha_ordinal | alpha_interval | spearman),
    judges ("a,b,c" for alpha; "a~b" for a pair), value, lo, hi, n_items, n_judges.
    """
    df = scored_frame(rows)
    out: list[dict[str, Any]] = []
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    for (level, criterion), g in df.groupby(["level", "criterion"], sort=False):
        wide = g.pivot_table(index="judge", columns="item", values="score", aggfunc="mean")
        judges = list(wide.index)
        if len(judges) < 2:
            continue
        mat = wide.to_numpy(dtype=float)
        for lvl in ("ordinal", "interval"):
            v, lo, hi, n = krippendorff_alpha(mat, lvl, n_boot=n_boot, seed=seed)
            out.append(_row(level, criterion, f"alpha_{lvl}", ",".join(judges), v, lo, hi, n, len(judges)))
        for a, b in itertools.combinations(range(len(judges)), 2):
            v, lo, hi, n = spearman(mat[a], mat[b], n_boot=n_boot, seed=seed)
            out.append(_row(level, criterion, "spearman", f"{judges[a]}~{judges[b]}", v, lo, hi, n, 2))
    res = pd.DataFrame(out, columns=COLUMNS)
    order = {c: i for i, c in enumerate([*criteria_for("agent"), *criteria_for("group"), "overall"])}
    return res.sort_values(
        ["level", "criterion"], key=lambda s: s.map(order) if s.name == "criterion" else s, kind="stable"
    ).reset_index(drop=True)


def panel_scores(rows: Iterable[dict[str, Any]], *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Mean 0-100 score per system x level x criterion for each judge and for the panel.

    The panel value of an item is the mean over the judges that scored it. Intervals resample
    contexts (pair_key clusters). ``unscored`` counts rows of that judge that were not scored.
    """
    rows = latest_judgments(rows)
    df = scored_frame(rows)
    uns = pd.DataFrame([r for r in rows if r.get("status") != "scored"])
    out: list[dict[str, Any]] = []
    if df.empty:
        return pd.DataFrame(
            columns=["system", "level", "criterion", "judge", "mean", "lo", "hi", "std", "n", "n_obs", "unscored"]
        )
    df["score_100"] = (df["score"] - 1.0) / 4.0 * 100.0
    panel = (
        df.groupby(["system", "level", "criterion", "item", "pair_key"], as_index=False)["score_100"].mean().assign(judge="panel")
    )
    both = pd.concat([df, panel], ignore_index=True)
    for (system, level, criterion, judge), g in both.groupby(["system", "level", "criterion", "judge"]):
        est = bootstrap_mean(g["score_100"].to_numpy(), g["pair_key"].tolist(), n_boot=n_boot, seed=seed)
        n_uns = 0
        if not uns.empty and criterion != "overall":
            m = (uns["system"] == system) & (uns["level"] == level) & (uns["criterion"] == criterion)
            if judge != "panel":
                m &= uns["judge"] == judge
            n_uns = int(m.sum())
        out.append({"system": system, "level": level, "criterion": criterion, "judge": judge, **est.to_dict(), "unscored": n_uns})
    return pd.DataFrame(out)


def human_agreement(
    judge_rows: Iterable[dict[str, Any]], human_rows: Iterable[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Inter-annotator alpha among humans, and each judge against the humans' mean rating.

    Human rows are judgment rows whose ``judge`` is ``human:<annotator>``. Returns the columns of
    :func:`agreement_table`; judge-vs-human rows have judges ``"<judge>~humans"`` with statistics
    alpha_interval (judge vs the mean human rating, two raters) and spearman.
    """
    h = scored_frame(human_rows)
    j = scored_frame(judge_rows)
    out = [agreement_table(human_rows, n_boot=n_boot, seed=seed).assign(judges=lambda d: "humans:" + d["judges"])]
    res: list[dict[str, Any]] = []
    if not h.empty and not j.empty:
        hmean = h.groupby(["level", "criterion", "item"])["score"].mean()
        for (level, criterion, judge), g in j.groupby(["level", "criterion", "judge"]):
            if (level, criterion) not in hmean.index.droplevel("item"):
                continue
            hm = hmean.loc[(level, criterion)]
            js = g.groupby("item")["score"].mean()
            items = sorted(set(hm.index) & set(js.index))
            if len(items) < 2:
                continue
            mat = np.vstack([js.loc[items].to_numpy(), hm.loc[items].to_numpy()])
            v, lo, hi, n = krippendorff_alpha(mat, "interval", n_boot=n_boot, seed=seed)
            res.append(_row(level, criterion, "alpha_interval", f"{judge}~humans", v, lo, hi, n, 2))
            v, lo, hi, n = spearman(mat[0], mat[1], n_boot=n_boot, seed=seed)
            res.append(_row(level, criterion, "spearman", f"{judge}~humans", v, lo, hi, n, 2))
    out.append(pd.DataFrame(res, columns=COLUMNS))
    return (
        pd.concat([o for o in out if not o.empty], ignore_index=True)
        if any(not o.empty for o in out)
        else pd.DataFrame(columns=COLUMNS)
    )
