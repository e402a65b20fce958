"""Did training learn? Figures with their n and 95% intervals, from ``train_log.jsonl``.

- reward model: held-out pairwise accuracy with its Clopper-Pearson interval (pairs of contexts never
  trained on); it beats chance when the interval's lower end is above 0.5;
- GRPO: the slope of the mean reward over optimizer steps (ordinary least squares, t interval), per
  adapter, and pooled over the Stage-1 personas with a fixed offset per persona (each persona's rewards
  are on its own scale); rising when the lower end is above 0.

Written into ``checkpoint.json`` (``metrics.evidence``) after every run and shown in docs/training.md and the
report's training sections.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def slope_ci(
    xs: Sequence[float], ys: Sequence[float], groups: list[str] | None = None, level: float = 0.95
) -> dict[str, Any] | None:
    """OLS slope of ys on xs (one intercept per group) with its t interval; None with too few points."""
    import numpy as np
    from scipy import stats

    g = groups or ["all"] * len(xs)
    names = sorted(set(g))
    n, k = len(xs), len(names) + 1
    if n <= k:
        return None
    X = np.zeros((n, k))
    X[:, 0] = xs
    for i, gi in enumerate(g):
        X[i, 1 + names.index(gi)] = 1.0
    y = np.asarray(ys, dtype=float)
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    dof = n - k
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.pinv(X.T @ X)
    se = float(np.sqrt(max(cov[0, 0], 0.0)))
    t = float(stats.t.ppf(0.5 + level / 2, dof))
    b = float(beta[0])
    return {"slope": b, "ci95": [b - t * se, b + t * se], "n": n, "groups": len(names), "se": se}


def grpo_series(rows: list[dict[str, Any]], name: str, key: str = "reward") -> list[tuple[int, float]]:
    """(step, value) of the adapter's latest training run (the log is append-only; a run starts with its 'lora' row)."""
    starts = [i for i, r in enumerate(rows) if r.get("step_name") == "lora" and r.get("name") == name]
    tail = rows[starts[-1] :] if starts else rows
    return [
        (int(r["step"]), float(r[key]))
        for r in tail
        if r.get("step_name") == "grpo" and r.get("name") == name and isinstance(r.get(key), (int, float))
    ]


def learning_evidence(rows: list[dict[str, Any]], personas: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rm = [r for r in rows if r.get("step_name") == "reward_model" and r.get("heldout_pairs")]
    if rm:
        last = rm[-1]
        ci = last.get("heldout_ci95")
        out["reward_model"] = {
            "heldout_accuracy": last.get("heldout_accuracy"),
            "heldout_pairs": last.get("heldout_pairs"),
            "ci95": ci,
            "beats_chance": bool(ci and ci[0] > 0.5),
        }
    grpo: dict[str, Any] = {}
    pooled_x, pooled_y, pooled_g = [], [], []
    for name in [*personas, "director"]:
        pts = grpo_series(rows, name)
        if not pts:
            continue
        fit = slope_ci([x for x, _ in pts], [y for _, y in pts])
        grpo[name] = {"steps": len(pts), "first_reward": pts[0][1], "last_reward": pts[-1][1], "slope": fit}
        if name != "director":
            pooled_x += [x for x, _ in pts]
            pooled_y += [y for _, y in pts]
            pooled_g += [name] * len(pts)
    if pooled_x:
        fit = slope_ci(pooled_x, pooled_y, pooled_g)
        grpo["stage1_pooled"] = {"slope": fit, "rising": bool(fit and fit["ci95"][0] > 0)}
    if grpo:
        out["grpo"] = grpo
    return out
