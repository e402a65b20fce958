"""Agreement between judges (and with human raters) per level and criterion.

Items are what a judge scores once: (dialogue, agent) at the agent level, the dialogue at the
group level. Statistics, each with a percentile bootstrap interval over items and its n:

- Krippendorff's alpha, ordinal and interval (the ``krippendorff`` package; missing scores allowed),
- pairwise Spearman correlations between judges (scipy).

Only *scored* rows enter; unscored ones are missing values, never zeros. ``overall`` is the mean of
a level's criteria for items where a judge scored every criterion.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..criteria import criteria_for
from ..stats.bootstrap import bootstrap_mean, bootstrap_statistic
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
        agg = g.groupby(["judge", "item", "dialogue_id", "pair_key", "system", "agent"], dropna=False)["score"].agg(["mean", "count"])
        agg = agg[agg["count"] == need].reset_index()
        if len(agg):
            parts.append(agg.assign(level=level, criterion="overall", score=agg["mean"]).drop(columns=["mean", "count"]))
    return pd.concat(parts, ignore_index=True)


def _alpha(matrix: np.ndarray, level: str) -> float:
    import krippendorff

    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    m = matrix[:, pairable]
    if m.shape[1] < 2:
        return float("nan")
    vals = m[~np.isnan(m)]
    if np.unique(vals).size < 2:
        return float("nan")  # no variation: alpha is undefined
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return float(krippendorff.alpha(reliability_data=m, level_of_measurement=level))
        except (ValueError, ZeroDivisionError):
            return float("nan")


def _coincidences(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-item coincidence matrices (items x V x V) of a raters x items matrix, and the value domain."""
    values = np.unique(m[~np.isnan(m)])
    counts = np.stack([(m == v).sum(axis=0) for v in values], axis=1).astype(float)  # items x V
    mu = counts.sum(axis=1)
    pair = counts[:, :, None] * counts[:, None, :]
    pair[:, np.arange(values.size), np.arange(values.size)] -= counts
    with np.errstate(divide="ignore", invalid="ignore"):
        o = pair / np.where(mu > 1, mu - 1, np.inf)[:, None, None]
    return o, values


def _alpha_from_coincidence(o: np.ndarray, values: np.ndarray, level: str) -> float:
    """Krippendorff's alpha from a coincidence matrix (Krippendorff 2011, 'Computing Krippendorff's alpha')."""
    nc = o.sum(axis=1)
    n = nc.sum()
    if n <= 1 or (nc > 0).sum() < 2:
        return float("nan")
    if level == "interval":
        delta = (values[:, None] - values[None, :]) ** 2
    elif level == "ordinal":
        cum = np.cumsum(nc)
        lo = np.minimum.outer(np.arange(values.size), np.arange(values.size))
        hi = np.maximum.outer(np.arange(values.size), np.arange(values.size))
        between = cum[hi] - np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0.0)
        delta = (between - (nc[:, None] + nc[None, :]) / 2.0) ** 2
    else:
        raise ValueError(level)
    d_o = (o * delta).sum() / n
    d_e = (np.outer(nc, nc) * delta).sum() / (n * (n - 1))
    return float(1.0 - d_o / d_e) if d_e > 0 else float("nan")


def krippendorff_alpha(matrix: np.ndarray, level: str = "interval", *, n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float, int]:
    """Alpha of a raters x items matrix (NaN = missing) with a bootstrap CI over items; n = pairable items.

    The point value comes from the ``krippendorff`` package; bootstrap replicates re-sum per-item
    coincidence matrices (the same statistic, computed without re-running the package each time).
    """
    matrix = np.asarray(matrix, dtype=float)
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    m = matrix[:, pairable]
    n = int(m.shape[1])
    if n < 2:
        return float("nan"), float("nan"), float("nan"), n
    point = _alpha(m, level)
    o, values = _coincidences(m)
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_boot):
        w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(float)
        reps.append(_alpha_from_coincidence(np.tensordot(w, o, axes=1), values, level))
    r = np.asarray(reps)
    r = r[~np.isnan(r)]
    if r.size == 0 or point != point:
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
    return res.sort_values(["level", "criterion"], key=lambda s: s.map(order) if s.name == "criterion" else s, kind="stable").reset_index(drop=True)


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
        return pd.DataFrame(columns=["system", "level", "criterion", "judge", "mean", "lo", "hi", "std", "n", "n_obs", "unscored"])
    df["score_100"] = (df["score"] - 1.0) / 4.0 * 100.0
    panel = df.groupby(["system", "level", "criterion", "item", "pair_key"], as_index=False)["score_100"].mean().assign(judge="panel")
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


def human_agreement(judge_rows: Iterable[dict[str, Any]], human_rows: Iterable[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
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
    return pd.concat([o for o in out if not o.empty], ignore_index=True) if any(not o.empty for o in out) else pd.DataFrame(columns=COLUMNS)
