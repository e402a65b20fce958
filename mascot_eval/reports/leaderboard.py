"""Leaderboard: one row per system and split with every criterion and metric, its interval and n.

CSV columns: ``run_id, system, split, tasks, judges, dialogues, reference`` then, for each measure
(``agent.emotion`` ... ``agent.overall``, ``group.fidelity`` ... ``group.overall``,
``metric.<name>``): ``<measure>`` (mean, 0-100 for judge criteria), ``<measure>.lo``,
``<measure>.hi`` (95% cluster bootstrap), ``<measure>.n`` (contexts) and ``<measure>.p_holm``
(paired test against the reference system on shared contexts, Holm-corrected; empty for the
reference itself). Markdown tables are laid out like the paper's.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..criteria import AGENT_CRITERIA, GROUP_CRITERIA
from ..runs.tables import measure_order
from ..stats.paired import significance_mark
from .paper import PAPER_CITATION, norm_system, paper_rows, paper_subset

ID_COLUMNS = ["run_id", "system", "split", "tasks", "judges", "dialogues", "reference"]
STAT_SUFFIXES = ("", ".lo", ".hi", ".n", ".p_holm")


def measure_title(measure: str) -> str:
    level, name = measure.split(".", 1)
    if name == "overall":
        return "Overall"
    if level in ("agent", "group"):
        return name.capitalize()  # the paper's column names: Emotion, Empathy, ..., Fidelity, ...
    return name


def _label_runs(summary: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, label in summary.get("labels", {}).items():
        run_id = key.split("/", 1)[0]
        out[label] = run_id if label not in out else f"{out[label]};{run_id}"
    return out


def leaderboard_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """The leaderboard table from a summary (see runs/summary.py)."""
    est = pd.DataFrame(summary.get("estimates", []))
    if est.empty:
        return pd.DataFrame(columns=ID_COLUMNS)
    est = est[est["judge"] == "all"]
    comps = pd.DataFrame(summary.get("comparisons", []))
    ref = summary.get("reference")
    task_est = pd.DataFrame(summary.get("task_estimates", []))
    dlg = pd.DataFrame(summary.get("counts", {}).get("dialogues", []))
    runs = _label_runs(summary)
    measures = measure_order(set(est["measure"]))
    rows = []
    for (label, split), g in est.groupby(["label", "split"], sort=True):
        by_m = g.set_index("measure")
        tasks = sorted(set(task_est[(task_est["label"] == label) & (task_est["split"] == split)]["task"])) if not task_est.empty else []
        n_dlg = int(dlg[(dlg["label"] == label) & (dlg["split"] == split)]["dialogues"].sum()) if not dlg.empty else 0
        row: dict[str, Any] = {
            "run_id": runs.get(label, ""), "system": label, "split": split, "tasks": ";".join(tasks),
            "judges": ";".join(summary.get("judges", [])), "dialogues": n_dlg, "reference": ref or "",
        }
        for m in measures:
            if m in by_m.index:
                e = by_m.loc[m]
                row[m], row[f"{m}.lo"], row[f"{m}.hi"], row[f"{m}.n"] = e["mean"], e["lo"], e["hi"], int(e["n"])
            else:
                row[m] = row[f"{m}.lo"] = row[f"{m}.hi"] = float("nan")
                row[f"{m}.n"] = 0
            row[f"{m}.p_holm"] = float("nan")
            if ref and label != ref and not comps.empty:
                c = comps[(comps["a"] == ref) & (comps["b"] == label) & (comps["split"] == split) & (comps["measure"] == m)]
                if not c.empty and c.iloc[0]["p_holm"] is not None:
                    row[f"{m}.p_holm"] = float(c.iloc[0]["p_holm"])
        rows.append(row)
    cols = ID_COLUMNS + [f"{m}{s}" for m in measures for s in STAT_SUFFIXES]
    return pd.DataFrame(rows, columns=cols)


def _num(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{digits}f}"


def _digits(measure: str) -> int:
    return 1 if measure.split(".")[0] in ("agent", "group") else 3


def cell(row: pd.Series | dict, measure: str, *, with_ci: bool = True) -> str:
    """'62.3 [58.0, 66.1]*' (mark: reference better/worse than this system, Holm-adjusted)."""
    d = _digits(measure)
    mean = row.get(measure)
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    s = _num(mean, d)
    if with_ci:
        s += f" [{_num(row.get(measure + '.lo'), d)}, {_num(row.get(measure + '.hi'), d)}]"
    return s + significance_mark(row.get(measure + ".p_holm"))


def compact_table(frame: pd.DataFrame, measures: list[str] | None = None) -> str:
    """Fixed-width text table for the terminal."""
    if frame.empty:
        return "(no scored results: no judgments or metrics in the run)"
    if measures is None:
        present = [m for m in ("agent.overall", "group.overall") if m in frame.columns and frame[m].notna().any()]
        metric_cols = [c for c in frame.columns if c.startswith("metric.") and c.count(".") == 1]
        measures = present + metric_cols[: max(0, 4 - len(present))]
    header = ["system", "split", "n"] + measures
    lines = [header]
    for _, r in frame.iterrows():
        lines.append([str(r["system"]), str(r["split"]), str(r["dialogues"])] + [cell(r, m) for m in measures])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(v.ljust(w) for v, w in zip(line, widths)) for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def markdown_tables(frame: pd.DataFrame, summary: dict[str, Any]) -> str:
    """Paper-style Markdown: agent-level and group-level tables per split, then per task beside the paper."""
    parts = [
        "Scores are 0-100 judge means ((s-1)/4*100) with 95% cluster-bootstrap intervals over contexts; "
        f"marks compare each system with the reference `{summary.get('reference') or '-'}` "
        "(paired Wilcoxon signed-rank on shared contexts, Holm-corrected): * p<0.05, ** p<0.01, *** p<0.001.",
    ]
    for split, g in frame.groupby("split", sort=True):
        for level, crits in (("agent", AGENT_CRITERIA), ("group", GROUP_CRITERIA)):
            ms = [f"{level}.{c}" for c in crits] + [f"{level}.overall"]
            if not any(m in g.columns and g[m].notna().any() for m in ms):
                continue
            header = ["System"] + [measure_title(m) for m in ms] + ["n"]
            rows = [[str(r["system"])] + [cell(r, m) if m in g.columns else "–" for m in ms] + [str(r.get(f"{level}.overall.n", ""))]
                    for _, r in g.iterrows()]
            parts.append(f"### {level.capitalize()}-level, {split}\n\n" + _md_table(header, rows))
        metric_cols = [c for c in g.columns if c.startswith("metric.") and c.count(".") == 1 and g[c].notna().any()]
        if metric_cols:
            header = ["System"] + [m.split(".", 1)[1] for m in metric_cols]
            rows = [[str(r["system"])] + [cell(r, m) for m in metric_cols] for _, r in g.iterrows()]
            parts.append(f"### Automatic metrics, {split}\n\n" + _md_table(header, rows))
    paper = paper_comparison(summary)
    for (task, level), df in paper.items():
        parts.append(f"### {task}, {level}-level, beside the paper ({PAPER_CITATION})\n\n" + _md_table(list(df.columns), df.values.tolist()))
    return "\n\n".join(parts) + "\n"


def paper_comparison(summary: dict[str, Any]) -> dict[tuple[str, str], pd.DataFrame]:
    """Per task with a published counterpart: our rows (mean [lo, hi], n) and the paper's rows."""
    te = pd.DataFrame(summary.get("task_estimates", []))
    out: dict[tuple[str, str], pd.DataFrame] = {}
    if te.empty:
        return out
    for task in sorted(te["task"].unique()):
        sub = paper_subset(task)
        if sub is None:
            continue
        for level, crits in (("agent", AGENT_CRITERIA), ("group", GROUP_CRITERIA)):
            ms = [f"{level}.{c}" for c in crits] + [f"{level}.overall"]
            ours = te[(te["task"] == task) & te["measure"].isin(ms)]
            pub = paper_rows(level, task)
            if ours.empty or pub.empty:
                continue
            header = ["Source", "System"] + [measure_title(m) for m in ms] + ["n"]
            rows = []
            for label, g in ours.groupby("label", sort=True):
                e = g.set_index("measure")
                rows.append(["ours", label] + [
                    f"{e.loc[m, 'mean']:.1f} [{_num(e.loc[m, 'lo'])}, {_num(e.loc[m, 'hi'])}]" if m in e.index else "–" for m in ms
                ] + [str(int(e["n"].max()))])
            ours_norm = {norm_system(lab.split("@")[0]) for lab in ours["label"]}
            for _, r in pub.iterrows():
                tag = "paper" + (" (approx.)" if bool(r.get("approx")) else "")
                sysname = str(r["system"]) + (" ◀" if norm_system(str(r["system"])) in ours_norm else "")
                rows.append([tag, sysname] + [f"{r[m.split('.', 1)[1]]:.1f}" for m in ms] + ["–"])
            out[(f"{task} ({sub[0]} {sub[1]})", level)] = pd.DataFrame(rows, columns=header)
    return out
