"""summary.json: every number of a run with its n and interval, plus the paired comparisons.

Layout (schema ``mascot-summary/1``)::

    estimates        per label x split x measure x judge: mean, lo, hi (95% cluster bootstrap), n, n_obs, std
    task_estimates   the same per task (judge means only), for printing beside the paper's per-valence tables
    comparisons      paired tests between systems on shared contexts (see stats/compare.py)
    corpus_metrics   corpus-level metric values per label x task (one number each: no interval)
    counts           dialogues per label x split x task, scored/unscored judge rows per judge
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..fileio import atomic_write_json
from ..stats.compare import compare_systems
from ..stats.describe import describe
from .rundir import RunDir
from .tables import ALL_JUDGES, RunData, load_runs

SCHEMA = "mascot-summary/1"
REFERENCE_SYSTEM = "mascot"


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items()} for row in df.to_dict("records")]


def pick_reference(labels: Sequence[str], reference: str | None = None) -> str | None:
    """The system the others are compared with: the given one, else `mascot` if present, else all pairs."""
    if reference is not None:
        return reference
    return REFERENCE_SYSTEM if REFERENCE_SYSTEM in labels else None


def summarize_data(data: RunData, *, reference: str | None = None, test: str = "wilcoxon",
                   n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    units = data.units
    est = describe(units, ("label", "split", "measure", "judge"), n_boot=n_boot, seed=seed)
    task_est = describe(units[units["judge"] == ALL_JUDGES], ("label", "split", "task", "measure"), n_boot=n_boot, seed=seed)
    labels = sorted(set(units["label"])) if not units.empty else []
    ref = pick_reference(labels, reference)
    comps = compare_systems(units, reference=ref if ref in labels else None, test=test, n_boot=n_boot, seed=seed)
    corpus = pd.DataFrame()
    if not data.metrics.empty and "unit" in data.metrics.columns:
        c = data.metrics[data.metrics["unit"] == "corpus"]
        if not c.empty:
            corpus = c.groupby(["label", "split", "task", "metric"], as_index=False)["value"].mean()
    counts = []
    for run_id, t in data.transcripts:
        counts.append({"label": data.label_of(run_id, t.system), "split": t.split, "task": t.task})
    count_df = pd.DataFrame(counts, columns=["label", "split", "task"])
    dialogues = count_df.groupby(["label", "split", "task"]).size().reset_index(name="dialogues") if counts else count_df
    scored: dict[str, int] = {}
    for r in data.judgments:
        if r.get("status") == "scored" and r.get("score_100") is not None:
            scored[str(r.get("judge"))] = scored.get(str(r.get("judge")), 0) + 1
    return {
        "schema": SCHEMA,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "runs": sorted(data.manifests),
        "labels": {f"{r}/{s}": lab for (r, s), lab in sorted(data.labels.items())},
        "judges": data.judges,
        "reference": ref,
        "test": test,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "level": 0.95, "cluster": "task:context_id"},
        "estimates": records(est),
        "task_estimates": records(task_est),
        "comparisons": records(comps),
        "corpus_metrics": records(corpus),
        "counts": {
            "dialogues": records(dialogues),
            "judgments_scored": scored,
            "judgments_unscored": {j: dict(c) for j, c in data.unscored.items()},
        },
    }


def summarize(rundir: RunDir | str, *, reference: str | None = None, test: str = "wilcoxon",
              n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Compute the statistics of one run directory and write its summary.json atomically."""
    rd = rundir if isinstance(rundir, RunDir) else RunDir(rundir)
    data = load_runs([rd])
    summary = summarize_data(data, reference=reference, test=test, n_boot=n_boot, seed=seed)
    manifest = data.manifests.get(rd.run_id, {})
    summary["run_id"] = rd.run_id
    summary["manifest"] = {k: manifest.get(k) for k in ("started", "ended", "status", "cost_usd", "settings") if k in manifest}
    atomic_write_json(rd.summary_path, summary)
    return summary
