"""Our counterparts of the paper's ablation table, MBTI x agent heatmap and model-size study.

Every function returns plain DataFrames (numbers with mean, std, 95% cluster-bootstrap lo/hi and
n) so the summary, the leaderboard and the report can print them; formatting is in
:mod:`mascot_eval.reports.leaderboard`.

* :func:`ablation_table` (paper: MASCOT vs MASCOT-P vs MASCOT-C, ``results/paper/ablation.csv``):
  one row per level x criterion, our systems' estimates beside the paper's values.
* :func:`mbti_heatmap` (paper Section 5.9): per user MBTI profile x agent, the agent-level
  Overall (or any agent measure, e.g. Consistency) with n dialogues per cell, plus an "all" row
  and column. The clusters are contexts, as everywhere.
* :func:`sensitivity_table` (paper Section 5.8): one row per run of a Director system, with the
  Director's and the speakers' model specs (from each run's manifest) and the group- and
  agent-level Overall; :func:`paper_sensitivity` gives the paper's digitised values.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA
from ..reports.paper import ABLATION_SYSTEMS, norm_system, paper_ablation, paper_size_sensitivity
from ..runs.tables import ALL_JUDGES, RunData
from ..taskspec import MBTI_TYPES
from .describe import describe

EST = ("mean", "std", "lo", "hi", "n")
ABLATION_BASES = {norm_system(s): s for s in ABLATION_SYSTEMS}  # mascot, mascotp, mascotc -> paper column


def _base(label: str) -> str:
    return label.split("@", 1)[0]


def ablation_table(summary: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Per split where MASCOT or an ablation was judged: rows (level, criterion) in the paper's
    order; for each of our labels ``<label>.mean``, ``.std``, ``.lo``, ``.hi``, ``.n``; then
    ``paper.MASCOT``, ``paper.MASCOT-P``, ``paper.MASCOT-C`` and ``paper.approx``."""
    est = pd.DataFrame(summary.get("estimates", []))
    if est.empty:
        return {}
    est = est[(est["judge"] == ALL_JUDGES) & est["label"].map(lambda x: norm_system(_base(x)) in ABLATION_BASES)]
    if est.empty:
        return {}
    paper = paper_ablation().set_index(["level", "criterion"])
    order = [(lv, c) for lv, crits in (("agent", AGENT_CRITERIA), ("group", GROUP_CRITERIA)) for c in (*crits, "overall")]
    out: dict[str, pd.DataFrame] = {}
    for split, g in est.groupby("split", sort=True):
        labels = sorted(set(g["label"]), key=lambda x: (list(ABLATION_BASES).index(norm_system(_base(x))), x))
        by = g.set_index(["label", "measure"])
        rows = []
        for lv, c in order:
            m = f"{lv}.{c}"
            if not any((lab, m) in by.index for lab in labels):
                continue
            row: dict[str, Any] = {"level": lv, "criterion": c}
            for lab in labels:
                e = by.loc[(lab, m)] if (lab, m) in by.index else None
                for k in EST:
                    row[f"{lab}.{k}"] = None if e is None else e[k]
            for s in ABLATION_SYSTEMS:
                row[f"paper.{s}"] = float(paper.loc[(lv, c), s]) if (lv, c) in paper.index else None
            row["paper.approx"] = bool(paper.loc[(lv, c), "approx"]) if (lv, c) in paper.index else None
            rows.append(row)
        if rows:
            out[str(split)] = pd.DataFrame(rows)
    return out


def _profiles(data: RunData) -> dict[tuple[str, str], str]:
    return {(run_id, t.dialogue_id): (t.user_profile or "-") for run_id, t in data.transcripts}


def mbti_heatmap(data: RunData, label: str, measure: str = "agent.overall", *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Long table: ``profile, agent, mean, std, lo, hi, n`` (n = dialogues in the cell, the
    interval over contexts), with ``profile == "all"`` / ``agent == "all"`` margins. Profiles in
    MBTI order (others after); agents in the group's order."""
    u = data.units
    u = u[(u["label"] == label) & (u["measure"] == measure) & (u["judge"] == ALL_JUDGES)] if not u.empty else u
    cols = ["profile", "agent", *EST]
    if u.empty:
        return pd.DataFrame(columns=cols)
    prof = _profiles(data)
    u = u.assign(profile=[prof.get((r, d), "-") for r, d in zip(u["run_id"], u["dialogue_id"])])
    frames = [u, u.assign(agent="all"), u.assign(profile="all"), u.assign(profile="all", agent="all")]
    df = pd.concat([describe(f, ("profile", "agent"), n_boot=n_boot, seed=seed) for f in frames], ignore_index=True)
    # n: dialogues in the cell (describe's n counts contexts, the bootstrap clusters)
    n_dlg: dict[tuple[str, str], int] = {}
    for f in frames:
        n_dlg.update({k: int(v) for k, v in f.groupby(["profile", "agent"])["dialogue_id"].nunique().items()})
    df["n"] = [n_dlg.get((p, a), 0) for p, a in zip(df["profile"], df["agent"])]
    agent_order = _agent_order(data, label)
    p_rank = {p: i for i, p in enumerate(MBTI_TYPES)}
    df["_p"] = [len(MBTI_TYPES) + 1 if p == "all" else p_rank.get(p, len(MBTI_TYPES)) for p in df["profile"]]
    df["_a"] = [
        len(agent_order) + 1 if a == "all" else (agent_order.index(a) if a in agent_order else len(agent_order))
        for a in df["agent"]
    ]
    return df.sort_values(["_p", "profile", "_a", "agent"]).drop(columns=["_p", "_a"])[cols].reset_index(drop=True)


def _agent_order(data: RunData, label: str) -> list[str]:
    for run_id, t in data.transcripts:
        if data.label_of(run_id, t.system) == label:
            return list(t.agents)
    return []


def heatmap_labels(data: RunData) -> list[str]:
    """Labels worth a heatmap: agent-level scores over at least two user profiles; MASCOT first."""
    u = data.units
    if u.empty:
        return []
    u = u[(u["measure"] == "agent.overall") & (u["judge"] == ALL_JUDGES)]
    prof = _profiles(data)
    out = []
    for label, g in u.groupby("label"):
        if len({prof.get((r, d)) for r, d in zip(g["run_id"], g["dialogue_id"])}) >= 2:
            out.append(str(label))
    return sorted(out, key=lambda x: (_base(x) != "mascot", x))


def _role_models(manifest: dict[str, Any], system: str) -> tuple[str | None, str | None]:
    """(Director spec, speaker spec(s)) a run recorded for a system (joined with ';' when they differ)."""
    info = (manifest.get("systems") or {}).get(system) or {}
    models = info.get("models") or {}
    directors: set[str] = set()
    speakers: set[str] = set()
    for m in models.values():  # per task
        if isinstance(m, dict):
            if m.get("director"):
                directors.add(m["director"])
            speakers.update(v for k, v in m.items() if k.startswith("agent:"))
    return (";".join(sorted(directors)) or None, ";".join(sorted(speakers)) or None)


SENSITIVITY_MEASURES = ("group.overall", "agent.overall")


def sensitivity_table(
    data: RunData, measures: tuple[str, ...] = SENSITIVITY_MEASURES, *, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """One row per (run, system) whose run recorded a Director model: ``run_id, system, label,
    director_model, speaker_model, dialogues`` and per measure ``<measure>.mean/.std/.lo/.hi/.n``."""
    rows = []
    u = data.units[data.units["judge"] == ALL_JUDGES] if not data.units.empty else data.units
    dialogues: dict[tuple[str, str], int] = {}
    for run_id, t in data.transcripts:
        dialogues[(run_id, t.system)] = dialogues.get((run_id, t.system), 0) + 1
    for (run_id, system), n_dlg in sorted(dialogues.items()):
        manifest = data.manifests.get(run_id) or {}
        info = (manifest.get("systems") or {}).get(system) or {}
        if info.get("kind") != "mascot":
            continue
        director, speaker = _role_models(manifest, system)
        label = data.label_of(run_id, system)
        row: dict[str, Any] = {
            "run_id": run_id,
            "system": system,
            "label": label,
            "director_model": director,
            "speaker_model": speaker,
            "dialogues": n_dlg,
        }
        sub = u[(u["run_id"] == run_id) & (u["system"] == system)] if not u.empty else u
        for m in measures:
            g = sub[sub["measure"] == m] if not sub.empty else sub
            e = describe(g.assign(k=1), ("k",), n_boot=n_boot, seed=seed) if not g.empty else None
            for k in EST:
                row[f"{m}.{k}"] = None if e is None or e.empty else e.iloc[0][k]
        rows.append(row)
    cols = ["run_id", "system", "label", "director_model", "speaker_model", "dialogues"] + [
        f"{m}.{k}" for m in measures for k in EST
    ]
    return pd.DataFrame(rows, columns=cols)


def paper_sensitivity() -> pd.DataFrame:
    """The paper's size study: factor, size, collective (group Overall), persona (agent Overall), approx."""
    return paper_size_sensitivity()


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows (NaN -> None) for summary.json."""
    from ..runs.summary import records as _records

    return _records(df)
