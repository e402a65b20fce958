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


def krippendorff_alpha(matrix: np.ndarray, level: str = "interval", *, n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float, int]:
    """Alpha of a raters x items matrix (NaN = missing) with a bootstrap CI over items; n = pairable items."""
    matrix = np.asarray(matrix, dtype=float)
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    m = matrix[:, pairable]
    n = int(m.shape[1])
    if n < 2:
        return float("nan"), float("nan"), float("nan"), n
    point, lo, hi = bootstrap_statistic(n, lambda idx: _alpha(m[:, idx], level), n_boot=n_boot, seed=seed)
    return point, lo, hi, n


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.unique(x).size < 2 or np.unique(y).size < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def spearman(x: np.ndarray, y: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> tuple[float, float, float, int]:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    n = int(x.size)
    if n < 3:
        return float("nan"), float("nan"), float("nan"), n
    point, lo, hi = bootstrap_statistic(n, lambda idx: _spearman(x[idx], y[idx]), n_boot=n_boot, seed=seed)
    return point, lo, hi, n


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
