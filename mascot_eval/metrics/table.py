"""Plain-text views of the metric registry and of a computed metrics table (for the CLI)."""

from __future__ import annotations

import math
import re

import pandas as pd

from . import METRICS


def first_sentence(text: str) -> str:
    """The description up to its first sentence end (". " followed by a capital, or the end)."""
    text = " ".join(text.split())
    m = re.search(r"\.\s+(?=[A-Z(])", text)
    return text[: m.start() + 1] if m else text


def list_table() -> str:
    """One line per registered metric: name, unit, what higher means, first sentence of the definition."""
    items = list(METRICS.items())
    w_name = max(len("name"), *(len(n) for n, _ in items))
    w_unit = max(len("unit"), *(len(m.unit) for _, m in items))
    w_high = max(len("higher ="), *(len(m.higher) for _, m in items))
    lines = [f"{'name':<{w_name}}  {'unit':<{w_unit}}  {'higher =':<{w_high}}  definition"]
    for name, m in items:
        lines.append(f"{name:<{w_name}}  {m.unit:<{w_unit}}  {m.higher:<{w_high}}  {first_sentence(m.description)}")
    lines.append(f"{len(items)} metrics; units: turn, round, agent (per dialogue), dialogue, corpus (system x task)")
    return "\n".join(lines)


def system_means(df: pd.DataFrame) -> pd.DataFrame:
    """Mean of each metric per system (rows: metric, columns: systems).

    Rows below the corpus level are first averaged within their dialogue, then over dialogues, so
    every dialogue weighs the same; corpus rows (one per system x task) are averaged over tasks.
    """
    if df.empty:
        return pd.DataFrame()
    parts = []
    corpus = df[df["unit"] == "corpus"]
    if not corpus.empty:
        parts.append(corpus.groupby(["metric", "system"])["value"].mean())
    rest = df[df["unit"] != "corpus"]
    if not rest.empty:
        per_dialogue = rest.groupby(["metric", "system", "dialogue_id"])["value"].mean()
        parts.append(per_dialogue.groupby(["metric", "system"]).mean())
    means = pd.concat(parts).unstack("system")
    order = list(dict.fromkeys(df["metric"]))
    return means.reindex(order)


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3f}"


def system_table(df: pd.DataFrame) -> str:
    """The compact per-system table the CLI prints: metric, unit, then one column per system."""
    means = system_means(df)
    if means.empty:
        return "(no metric values)"
    systems = list(means.columns)
    units = df.drop_duplicates("metric").set_index("metric")["unit"]
    n = df[df["dialogue_id"].notna()].groupby("system")["dialogue_id"].nunique()
    header = ["metric", "unit", *systems]
    rows = [["dialogues", "", *[str(int(n.get(s, 0))) for s in systems]]]
    for metric, vals in means.iterrows():
        rows.append([str(metric), str(units.get(metric, "")), *[_fmt(vals[s]) for s in systems]])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for r in [header, *rows]:
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1])] + [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)
