"""Per-round views of per-turn and per-round metrics: persona drift and inter-agent redundancy.

For a metric with a ``round`` (a turn or round unit), each dialogue's values are averaged per
round first, then per round and system (or agent) the mean over dialogues with a 95% bootstrap
over contexts; and per system the change from the first to the last round (per dialogue, then
bootstrapped). Profiles of one context resample together (the cluster is ``task:context_id``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..fileio import stable_hash
from .bootstrap import bootstrap_mean

PERSONA_METRICS = ("persona_similarity", "persona_card_margin")
REDUNDANCY_METRICS = ("inter_agent_selfbleu", "inter_agent_rougeL", "inter_agent_cosine")
ROUND_METRICS = PERSONA_METRICS + REDUNDANCY_METRICS


def context_of(pair_key: str) -> str:
    """The context part of a pair key ``task:context_id:profile`` (profiles of one context resample together)."""
    return pair_key[: pair_key.rfind(":")] if ":" in pair_key else pair_key


def _rows_of(metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    if metrics.empty or not {"metric", "round", "dialogue_id"} <= set(metrics.columns):
        return pd.DataFrame()
    m = metrics[(metrics["metric"] == metric) & metrics["round"].notna() & metrics["dialogue_id"].notna()]
    m = m.assign(value=pd.to_numeric(m["value"], errors="coerce")).dropna(subset=["value"])
    return m.assign(round=m["round"].astype(float).astype(int)) if not m.empty else m


def round_series(
    metrics: pd.DataFrame, metric: str, *, by_agent: bool = False, n_boot: int = 500, seed: int = 0
) -> list[dict[str, Any]]:
    """Per label (and agent) and round: mean of the per-dialogue means of ``metric``, 95% interval, n contexts."""
    m = _rows_of(metrics, metric)
    if m.empty:
        return []
    keys = ["label", "agent", "round"] if by_agent else ["label", "round"]
    if by_agent:
        m = m[m["agent"].notna()]
    out = []
    for key, g in m.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        dm = g.groupby(["dialogue_id", "pair_key"], as_index=False)["value"].mean()
        s = int(stable_hash([seed, metric, *map(str, key)], 8), 16)
        e = bootstrap_mean(dm["value"].to_numpy(float), [context_of(str(k)) for k in dm["pair_key"]], n_boot=n_boot, seed=s)
        out.append(
            {
                "label": key[0],
                "metric": metric,
                "agent": key[1] if by_agent else None,
                "round": int(key[-1]),
                "mean": e.mean,
                "lo": e.lo,
                "hi": e.hi,
                "n": e.n,
            }
        )
    return out


def round_changes(metrics: pd.DataFrame, metric: str, *, n_boot: int = 500, seed: int = 0) -> list[dict[str, Any]]:
    """Per label: first- and last-round means of ``metric`` and the change (last - first) with a 95%
    bootstrap over contexts of the per-dialogue changes."""
    m = _rows_of(metrics, metric)
    out: list[dict[str, Any]] = []
    if m.empty:
        return out
    for lab, g in m.groupby("label", sort=True):
        per = g.groupby(["dialogue_id", "pair_key", "round"], as_index=False)["value"].mean()
        first_r, last_r = int(per["round"].min()), int(per["round"].max())
        if first_r == last_r:
            continue
        a = per[per["round"] == first_r].set_index("dialogue_id")
        b = per[per["round"] == last_r].set_index("dialogue_id")
        ids = a.index.intersection(b.index)
        if not len(ids):
            continue
        d = (b.loc[ids, "value"] - a.loc[ids, "value"]).to_numpy(float)
        s = int(stable_hash([seed, metric, str(lab)], 8), 16)
        e = bootstrap_mean(d, [context_of(str(k)) for k in a.loc[ids, "pair_key"]], n_boot=n_boot, seed=s)
        out.append(
            {
                "label": str(lab),
                "metric": metric,
                "first_round": first_r,
                "last_round": last_r,
                "mean_first": float(a.loc[ids, "value"].mean()),
                "mean_last": float(b.loc[ids, "value"].mean()),
                "change": e.mean,
                "change_lo": e.lo,
                "change_hi": e.hi,
                "n": e.n,
            }
        )
    return out


def judge_round_frame(judgments: list[dict[str, Any]], criterion: str, label_of: Any) -> pd.DataFrame:
    """Judge rows that carry a ``round`` (per-round judging) as a metrics-like frame (empty when judges
    scored whole dialogues, the default)."""
    rows = [
        {
            "dialogue_id": r["dialogue_id"],
            "pair_key": r["pair_key"],
            "label": label_of(r.get("run_id", ""), r["system"]),
            "agent": r.get("agent"),
            "round": r["round"],
            "metric": f"judge_{criterion}",
            "value": float(r["score_100"]),
        }
        for r in judgments
        if r.get("round") is not None
        and r.get("criterion") == criterion
        and r.get("status") == "scored"
        and r.get("score_100") is not None
    ]
    return pd.DataFrame(rows)
