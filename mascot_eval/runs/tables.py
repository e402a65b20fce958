"""Turn what a run wrote (judgments.jsonl, metrics.parquet) into one long table of *units*.

A unit is the smallest thing a statistic is computed over:

* agent-level judge criteria: one value per (dialogue, agent), the mean over judges that scored it;
* group-level judge criteria: one value per dialogue, the mean over judges;
* automatic metrics: one value per dialogue (the mean of its turn/round/agent rows).

Each row names its measure (``agent.empathy``, ``agent.overall``, ``group.fidelity``,
``metric.distinct_2``) and its cluster (the context, ``task:context_id``), which is what the
bootstrap resamples. ``overall`` is the unweighted mean of a level's criteria and exists only
for units where every criterion of the level was scored (so it never mixes in missing scores).
Unscored judge rows are counted, never treated as a score.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..criteria import criteria_for
from ..errors import UserError
from ..records.judgment import latest_rows
from .rundir import RunDir

UNIT_COLUMNS = [
    "label",
    "system",
    "run_id",
    "task",
    "split",
    "domain",
    "context_id",
    "pair_key",
    "cluster",
    "dialogue_id",
    "measure",
    "level",
    "name",
    "agent",
    "judge",
    "value",
]
ALL_JUDGES = "all"


def _judge_measures() -> list[str]:
    from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA

    return [f"agent.{c}" for c in AGENT_CRITERIA] + ["agent.overall"] + [f"group.{c}" for c in GROUP_CRITERIA] + ["group.overall"]


JUDGE_MEASURES = _judge_measures()


def measure_order(measures: Iterable[str]) -> list[str]:
    """Judge measures in the paper's column order, then metrics alphabetically."""
    ms = set(measures)
    return [m for m in JUDGE_MEASURES if m in ms] + sorted(m for m in ms if m not in JUDGE_MEASURES)


@dataclass
class RunData:
    """Everything the statistics and reports need from one or more run directories."""

    units: pd.DataFrame  # UNIT_COLUMNS; judge == "all" rows are the judge means
    metrics: pd.DataFrame  # raw metrics rows (long format from metrics.compute) + label, run_id
    judgments: list[dict[str, Any]]
    transcripts: list[Any]  # Transcript objects (with .label set in `labels`)
    comparisons: list[dict[str, Any]]
    manifests: dict[str, dict[str, Any]]  # run_id -> manifest
    labels: dict[tuple[str, str], str]  # (run_id, system) -> label shown in tables
    unscored: dict[str, Counter] = field(default_factory=dict)  # judge -> reason counts
    judges: list[str] = field(default_factory=list)

    def label_of(self, run_id: str, system: str) -> str:
        return self.labels.get((run_id, system), system)


def _cluster(task: str, context_id: str) -> str:
    return f"{task}:{context_id}"


def judgment_units(rows: Iterable[dict[str, Any]], *, run_id: str = "") -> tuple[pd.DataFrame, dict[str, Counter]]:
    """Judgment rows -> unit rows per judge and judge-mean (judge == "all"), with overall."""
    scored: list[dict[str, Any]] = []
    unscored: dict[str, Counter] = {}
    for r in latest_rows(rows):
        if r.get("status") != "scored" or r.get("score_100") is None:
            unscored.setdefault(str(r.get("judge")), Counter())[str(r.get("reason") or "unscored")] += 1
            continue
        level = r.get("level")
        if level not in ("agent", "group"):
            continue
        scored.append(
            {
                "system": r["system"],
                "run_id": run_id,
                "task": r["task"],
                "split": r["split"],
                "domain": r.get("domain", ""),
                "context_id": str(r["context_id"]),
                "pair_key": r["pair_key"],
                "dialogue_id": r["dialogue_id"],
                "level": level,
                "name": r["criterion"],
                "agent": r.get("agent") if level == "agent" else None,
                "judge": r["judge"],
                "value": float(r["score_100"]),
            }
        )
    if not scored:
        return pd.DataFrame(columns=UNIT_COLUMNS), unscored
    df = pd.DataFrame(scored)
    df["agent"] = df["agent"].fillna("")
    keys = ["system", "run_id", "task", "split", "domain", "context_id", "pair_key", "dialogue_id", "level", "name", "agent"]
    per_judge = df.groupby(keys + ["judge"], as_index=False, sort=False)["value"].mean()
    mean = per_judge.groupby(keys, as_index=False, sort=False)["value"].mean()
    mean["judge"] = ALL_JUDGES
    both = pd.concat([per_judge, mean], ignore_index=True) if per_judge["judge"].nunique() > 1 else mean
    overall = _overall(both, keys)
    out = pd.concat([both, overall], ignore_index=True)
    out["measure"] = out["level"] + "." + out["name"]
    out["cluster"] = [_cluster(t, c) for t, c in zip(out["task"], out["context_id"])]
    out["label"] = out["system"]
    return out[UNIT_COLUMNS], unscored


def _overall(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    parts = []
    unit_keys = [k for k in keys if k != "name"] + ["judge"]
    for level in ("agent", "group"):
        sub = df[df["level"] == level]
        if sub.empty:
            continue
        need = set(criteria_for(level))
        sub = sub[sub["name"].isin(need)]
        g = sub.groupby(unit_keys, as_index=False, sort=False).agg(value=("value", "mean"), k=("name", "nunique"))
        g = g[g["k"] == len(need)].drop(columns="k")
        g["name"] = "overall"
        parts.append(g)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(df.columns))


def metric_units(metrics: pd.DataFrame, *, run_id: str = "") -> pd.DataFrame:
    """Dialogue-level metric values (mean over a dialogue's rows); corpus rows are left out."""
    if metrics is None or metrics.empty:
        return pd.DataFrame(columns=UNIT_COLUMNS)
    m = metrics[metrics["dialogue_id"].notna()]
    if m.empty:
        return pd.DataFrame(columns=UNIT_COLUMNS)
    m = m[pd.to_numeric(m["value"], errors="coerce").notna()].copy()
    m["value"] = m["value"].astype(float)
    if "context_id" in m.columns:
        ctx = m["context_id"].astype(str)
    else:  # pair_key = task:context_id:profile (context ids may contain ':')
        ctx = [pk[len(t) + 1 : pk.rfind(":")] for pk, t in zip(m["pair_key"], m["task"])]
    m = m.assign(context_id=ctx)
    keys = ["system", "task", "split", "domain", "context_id", "pair_key", "dialogue_id", "metric"]
    g = m.groupby(keys, as_index=False, sort=False)["value"].mean()
    g = g.rename(columns={"metric": "name"})
    g["run_id"] = run_id
    g["level"] = "metric"
    g["measure"] = "metric." + g["name"]
    g["agent"] = ""
    g["judge"] = ALL_JUDGES
    g["cluster"] = [_cluster(t, c) for t, c in zip(g["task"], g["context_id"])]
    g["label"] = g["system"]
    return g[UNIT_COLUMNS]


def read_metrics(rundir: RunDir) -> pd.DataFrame:
    if rundir.metrics_path.exists():
        return pd.read_parquet(rundir.metrics_path)
    csv = rundir.path / "metrics.csv"
    if csv.exists():
        return pd.read_csv(csv)
    return pd.DataFrame(
        columns=["dialogue_id", "pair_key", "system", "task", "split", "domain", "agent", "round", "metric", "value", "unit"]
    )


def load_runs(paths: Sequence[str | Path | RunDir]) -> RunData:
    """Read one or more run directories into a :class:`RunData`.

    A system evaluated in several runs gets the label ``system@run-id`` so the runs stay apart
    (e.g. the same `mascot` system with two checkpoints).
    """
    rundirs = [p if isinstance(p, RunDir) else RunDir(p) for p in paths]
    if not rundirs:
        raise UserError("no run directory given; pass one or more folders written by `mascot-eval run`")
    ids = [r.run_id for r in rundirs]
    if len(set(ids)) != len(ids):
        raise UserError(f"run directories share a name ({', '.join(ids)}); pass each run once")
    unit_parts: list[pd.DataFrame] = []
    metric_parts: list[pd.DataFrame] = []
    judgments: list[dict[str, Any]] = []
    transcripts: list[Any] = []  # (run_id, Transcript)
    comparisons: list[dict[str, Any]] = []
    manifests: dict[str, dict[str, Any]] = {}
    unscored: dict[str, Counter] = {}
    systems_in: dict[str, set[str]] = {}
    for rd in rundirs:
        manifests[rd.run_id] = rd.read_manifest()
        ts = rd.transcripts()
        transcripts.extend((rd.run_id, t) for t in ts)
        rows = latest_rows(rd.judgments())
        judgments.extend({**r, "run_id": rd.run_id} for r in rows)
        comparisons.extend({**r, "run_id": rd.run_id} for r in rd.comparisons())
        ju, un = judgment_units(rows, run_id=rd.run_id)
        for j, c in un.items():
            unscored.setdefault(j, Counter()).update(c)
        mdf = read_metrics(rd)
        mdf = mdf.assign(run_id=rd.run_id)
        metric_parts.append(mdf)
        unit_parts.extend([ju, metric_units(mdf, run_id=rd.run_id)])
        for s in {t.system for t in ts} | set(ju["system"]) | set(mdf["system"].dropna()):
            systems_in.setdefault(s, set()).add(rd.run_id)
    labels = {}
    for s, runs in systems_in.items():
        for rid in runs:
            labels[(rid, s)] = s if len(runs) == 1 else f"{s}@{rid}"
    units = (
        pd.concat([u for u in unit_parts if not u.empty], ignore_index=True)
        if any(not u.empty for u in unit_parts)
        else pd.DataFrame(columns=UNIT_COLUMNS)
    )
    if not units.empty:
        units["label"] = [labels.get((r, s), s) for r, s in zip(units["run_id"], units["system"])]
    metrics = pd.concat(metric_parts, ignore_index=True) if metric_parts else pd.DataFrame()
    if not metrics.empty:
        metrics["label"] = [labels.get((r, s), s) for r, s in zip(metrics["run_id"], metrics["system"])]
    judges = sorted({str(r.get("judge")) for r in judgments if r.get("judge")})
    return RunData(
        units=units,
        metrics=metrics,
        judgments=judgments,
        transcripts=transcripts,
        comparisons=comparisons,
        manifests=manifests,
        labels=labels,
        unscored=unscored,
        judges=judges,
    )
