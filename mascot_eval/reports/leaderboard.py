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
        tasks = (
            sorted(set(task_est[(task_est["label"] == label) & (task_est["split"] == split)]["task"]))
            if not task_est.empty
            else []
        )
        n_dlg = int(dlg[(dlg["label"] == label) & (dlg["split"] == split)]["dialogues"].sum()) if not dlg.empty else 0
        row: dict[str, Any] = {
            "run_id": runs.get(label, ""),
            "system": label,
            "split": split,
            "tasks": ";".join(tasks),
            "judges": ";".join(summary.get("judges", [])),
            "dialogues": n_dlg,
            "reference": ref or "",
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


def markdown_tables(frame: pd.DataFrame, summary: dict[str, Any], data: Any = None) -> str:
    """Paper-style Markdown: agent-level and group-level tables per split, then per task beside the
    paper, the ablation table beside the paper's; with ``data`` (RunData) also how each system's
    decisions were made, the MBTI x agent heatmaps and the model-size sensitivity table."""
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
            rows = [
                [str(r["system"])] + [cell(r, m) if m in g.columns else "–" for m in ms] + [str(r.get(f"{level}.overall.n", ""))]
                for _, r in g.iterrows()
            ]
            parts.append(f"### {level.capitalize()}-level, {split}\n\n" + _md_table(header, rows))
        metric_cols = [c for c in g.columns if c.startswith("metric.") and c.count(".") == 1 and g[c].notna().any()]
        if metric_cols:
            header = ["System"] + [m.split(".", 1)[1] for m in metric_cols]
            rows = [[str(r["system"])] + [cell(r, m) for m in metric_cols] for _, r in g.iterrows()]
            parts.append(f"### Automatic metrics, {split}\n\n" + _md_table(header, rows))
    paper = paper_comparison(summary)
    for (task, level), df in paper.items():
        parts.append(
            f"### {task}, {level}-level, beside the paper ({PAPER_CITATION})\n\n"
            + _md_table(list(df.columns), df.values.tolist())
        )
    parts.extend(ablation_markdown(summary))
    if data is not None:
        parts.extend(
            extra_markdown(
                data,
                n_boot=int((summary.get("bootstrap") or {}).get("n_boot") or 1000),
                seed=int((summary.get("bootstrap") or {}).get("seed") or 0),
            )
        )
    return "\n\n".join(parts) + "\n"


def est_cell(e: dict[str, Any] | pd.Series | None, prefix: str = "", *, n: bool = True) -> str:
    """'62.3 ± 8.1 [58.0, 66.1] n=8' from mean/std/lo/hi/n (keys optionally prefixed)."""
    if e is None:
        return "–"
    mean = e.get(prefix + "mean")
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    s = f"{mean:.1f} ± {_num(e.get(prefix + 'std'))} [{_num(e.get(prefix + 'lo'))}, {_num(e.get(prefix + 'hi'))}]"
    if n and (count := e.get(prefix + "n")) is not None:
        s += f" n={int(count)}"
    return s


def ablation_markdown(summary: dict[str, Any]) -> list[str]:
    """The ablation table per split: ours (mean ± std [95% CI] n contexts) beside the paper's."""
    from ..stats.figures import ablation_table
    from .paper import ABLATION_SYSTEMS

    out = []
    for split, df in ablation_table(summary).items():
        labels = [c[: -len(".mean")] for c in df.columns if c.endswith(".mean")]
        header = ["Level", "Criterion"] + labels + [f"paper {s}" for s in ABLATION_SYSTEMS]
        rows = []
        for _, r in df.iterrows():
            crit = "Overall" if r["criterion"] == "overall" else str(r["criterion"]).capitalize()
            rows.append(
                [str(r["level"]), crit]
                + [est_cell(r, f"{lab}.") for lab in labels]
                + [_num(r[f"paper.{s}"]) for s in ABLATION_SYSTEMS]
            )
        out.append(
            f"### Ablations, {split}, beside the paper ({PAPER_CITATION}; approx., dataset not stated)\n\n"
            "Ours: mean ± std [95% cluster-bootstrap interval] n contexts; the paper gives means only.\n\n"
            + _md_table(header, rows)
        )
    return out


def decisions_markdown(transcripts: Any, labels: dict | None = None) -> list[str]:
    """How each Director / MultiAgentESC decision was obtained, with counts (from the transcripts)."""
    from ..stats.decisions import SOURCES, decision_rows, decision_stats

    stats = decision_stats(transcripts, labels)
    rows = decision_rows(stats)
    if not rows:
        return []
    header = ["System", "Decision", "Mode", "n"] + list(SOURCES) + ["Valid", "Rounds not round-robin"]
    body = [
        [r["system"], r["decision"], r["mode"], str(r["decisions"])]
        + [str(r[s]) for s in SOURCES]
        + ["–" if r["valid_share"] is None else f"{r['valid_share']:.0%}", r["not_round_robin"] or "–"]
        for r in rows
    ]
    parts = [
        "### Decisions (how each Director / MultiAgentESC decision was made)\n\n"
        "constrained = choice scoring or JSON schema (valid by construction), parsed = free text valid at once, "
        "reasked = valid after one re-ask, fallback = the documented fallback; valid = not a fallback.\n\n"
        + _md_table(header, body)
    ]
    dist = []
    for label, row in stats.items():
        d = row.get("director")
        if d:
            for what in ("first_speakers", "speakers", "actions", "tones"):
                if d[what]:
                    dist.append([label, what.replace("_", " "), "; ".join(f"{k} {v}" for k, v in d[what].items())])
    if dist:
        parts.append("### Director choices (turns per value)\n\n" + _md_table(["System", "Choice", "Counts"], dist))
    return parts


def heatmap_markdown(df: pd.DataFrame, label: str, measure: str) -> str:
    """Rows: user MBTI profiles; columns: agents; cells 'mean (n dialogues)'; 'all' margins."""
    agents = list(dict.fromkeys(df["agent"]))
    profiles = list(dict.fromkeys(df["profile"]))
    cell = {(p, a): f"{m:.1f} (n={int(n)})" for p, a, m, n in zip(df["profile"], df["agent"], df["mean"], df["n"])}
    rows = [[p] + [cell.get((p, a), "–") for a in agents] for p in profiles]
    return (
        f"### {label}: {measure_title(measure)} ({measure}) by user MBTI profile x agent (paper Section 5.9 layout)\n\n"
        "0-100 judge means, n = dialogues per cell; the paper's values are not transcribed (results/paper/README.md).\n\n"
        + _md_table(["Profile"] + agents, rows)
    )


def sensitivity_markdown(table: pd.DataFrame) -> str:
    """Our model-size sensitivity rows beside the paper's digitised study."""
    from ..stats.figures import SENSITIVITY_MEASURES, paper_sensitivity

    header = ["System", "Director model", "Speaker model", "Dialogues"] + [
        ("Collective (group Overall)" if m == "group.overall" else "Persona (agent Overall)" if m == "agent.overall" else m)
        for m in SENSITIVITY_MEASURES
    ]
    rows = [
        [str(r["label"]), str(r["director_model"]), str(r["speaker_model"]), str(r["dialogues"])]
        + [est_cell(r, f"{m}.") for m in SENSITIVITY_MEASURES]
        for _, r in table.iterrows()
    ]
    pub = paper_sensitivity()
    prow = [[str(r["factor"]).capitalize(), str(r["size"]), _num(r["collective"]), _num(r["persona"])] for _, r in pub.iterrows()]
    return (
        "### Model-size sensitivity (ours)\n\nmean ± std [95% cluster-bootstrap interval] n contexts.\n\n"
        + _md_table(header, rows)
        + f"\n\n### Model-size sensitivity, the paper ({PAPER_CITATION}, Section 5.8; approx., read off its chart; "
        "the role not varied at 8B)\n\n" + _md_table(["Varied", "Size", "Collective", "Persona"], prow)
    )


def extra_markdown(data: Any, *, n_boot: int = 1000, seed: int = 0) -> list[str]:
    """Sections that need the runs themselves: decisions, MBTI heatmaps, size sensitivity."""
    from ..stats.figures import heatmap_labels, mbti_heatmap, sensitivity_table

    parts = decisions_markdown(data.transcripts, data.labels)
    for label in heatmap_labels(data):
        for measure in ("agent.overall", "agent.consistency"):
            df = mbti_heatmap(data, label, measure, n_boot=n_boot, seed=seed)
            if not df.empty:
                parts.append(heatmap_markdown(df, label, measure))
    table = sensitivity_table(data, n_boot=n_boot, seed=seed)
    if not table.empty and table.groupby("system").size().max() >= 2:  # one system over several model settings
        parts.append(sensitivity_markdown(table))
    return parts


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
                rows.append(
                    ["ours", label]
                    + [
                        f"{e.loc[m, 'mean']:.1f} [{_num(e.loc[m, 'lo'])}, {_num(e.loc[m, 'hi'])}]" if m in e.index else "–"
                        for m in ms
                    ]
                    + [str(int(e["n"].max()))]
                )
            ours_norm = {norm_system(lab.split("@")[0]) for lab in ours["label"]}
            for _, r in pub.iterrows():
                tag = "paper" + (" (approx.)" if bool(r.get("approx")) else "")
                sysname = str(r["system"]) + (" ◀" if norm_system(str(r["system"])) in ours_norm else "")
                rows.append([tag, sysname] + [f"{r[m.split('.', 1)[1]]:.1f}" for m in ms] + ["–"])
            out[(f"{task} ({sub[0]} {sub[1]})", level)] = pd.DataFrame(rows, columns=header)
    return out
