"""Report figures (matplotlib, Agg) returned as base64 PNG data URIs so the HTML is self-contained.

Each figure is drawn from plain numbers the summary holds (lists of dicts), never from raw rows.
:func:`cached` draws a figure once per distinct input: the PNG is kept in the user cache under the
hash of the figure kind, its numbers and this module's code, so an unchanged report costs nothing.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

DPI = 90


def cached(kind: str, *args: object, **kw: object) -> str | None:
    """The data URI of figure ``kind`` (a function of this module) for these arguments, drawn once."""
    import hashlib
    from pathlib import Path

    from .. import paths
    from ..fileio import atomic_write_text, stable_hash

    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    key = stable_hash([kind, code, args, kw], 24)
    folder = paths.cache_dir() / "figures"
    path = folder / f"{key}.uri"
    if path.exists():
        text = path.read_text(encoding="ascii")
        return text or None
    uri = FIGURES[kind](*args, **kw)
    atomic_write_text(path, uri or "")
    return uri


def to_data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _colors(labels: Sequence[str]) -> dict[str, str]:
    cmap = plt.get_cmap("tab10")
    return {lab: matplotlib.colors.to_hex(cmap(i % 10)) for i, lab in enumerate(labels)}


def bars(est: list[dict], measures: Sequence[str], title: str, *, ylabel: str = "score (0-100)") -> str | None:
    """Grouped bars: one group per measure, one bar per system, 95% interval as error bars.
    ``est``: rows with label, measure, mean, lo, hi."""
    e = pd.DataFrame(est)
    if e.empty:
        return None
    e = e[e["measure"].isin(measures)]
    if e.empty:
        return None
    labels = sorted(e["label"].unique())
    ms = [m for m in measures if m in set(e["measure"])]
    colors = _colors(labels)
    width = 0.8 / len(labels)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(ms) + 1), 3.4))
    x = np.arange(len(ms))
    for i, lab in enumerate(labels):
        sub = e[e["label"] == lab].set_index("measure")
        means = np.array([sub.loc[m, "mean"] if m in sub.index else np.nan for m in ms], dtype=float)
        lo = np.array([sub.loc[m, "lo"] if m in sub.index else np.nan for m in ms], dtype=float)
        hi = np.array([sub.loc[m, "hi"] if m in sub.index else np.nan for m in ms], dtype=float)
        yerr = np.vstack([np.clip(means - lo, 0, None), np.clip(hi - means, 0, None)])
        ax.bar(
            x + (i - (len(labels) - 1) / 2) * width,
            means,
            width,
            yerr=np.nan_to_num(yerr),
            capsize=3,
            label=lab,
            color=colors[lab],
        )
    ax.set_xticks(x, [m.split(".", 1)[1] for m in ms], rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if ylabel.startswith("score"):
        ax.set_ylim(0, 100)
    ax.legend(fontsize=7, ncol=min(4, len(labels)), loc="upper left", bbox_to_anchor=(0, -0.25))
    ax.grid(axis="y", alpha=0.3)
    return to_data_uri(fig)


def radar(est: list[dict], label: str, measures: Sequence[str], title: str) -> str | None:
    """Radar of one system's criteria (0-100), with the interval as a shaded band."""
    e = pd.DataFrame(est)
    if e.empty:
        return None
    sub = e[(e["label"] == label) & e["measure"].isin(measures)].set_index("measure")
    ms = [m for m in measures if m in sub.index]
    if len(ms) < 3:
        return None
    angles = np.linspace(0, 2 * math.pi, len(ms), endpoint=False).tolist()
    vals = [float(sub.loc[m, "mean"]) for m in ms]
    lo = [float(sub.loc[m, "lo"]) for m in ms]
    hi = [float(sub.loc[m, "hi"]) for m in ms]
    close = lambda v: v + v[:1]  # noqa: E731
    fig = plt.figure(figsize=(3.3, 3.3))
    ax = fig.add_subplot(111, polar=True)
    ax.plot(close(angles), close(vals), color="#1f77b4")
    ax.fill_between(close(angles), close(lo), close(hi), color="#1f77b4", alpha=0.25)
    ax.set_xticks(angles, [m.split(".", 1)[1] for m in ms], fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_yticks([25, 50, 75], ["25", "50", "75"], fontsize=6)
    ax.set_title(title, fontsize=9)
    return to_data_uri(fig)


def per_round(series: list[dict], title: str, ylabel: str, *, by: str = "label") -> str | None:
    """Mean by round, one line per ``by`` value (system or agent), with the 95% band (from the summary's
    ``rounds``: rows with label/agent, round, mean, lo, hi)."""
    t = pd.DataFrame(series)
    if t.empty:
        return None
    keys = sorted(t[by].astype(str).unique())
    colors = _colors(keys)
    fig, ax = plt.subplots(figsize=(5.0, 3.0))
    for key in keys:
        sub = t[t[by].astype(str) == key].sort_values("round")
        ax.plot(sub["round"], sub["mean"].astype(float), marker="o", label=key, color=colors[key])
        ax.fill_between(sub["round"], sub["lo"].astype(float), sub["hi"].astype(float), color=colors[key], alpha=0.15)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    # matplotlib's stub types Locator.set_params without **kwargs; the default AutoLocator takes integer=
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return to_data_uri(fig)


def panels(
    data: dict[str, dict[str, Sequence[tuple[float, float]]]], title: str, *, xlabels: dict[str, str] | None = None
) -> str | None:
    """Small multiples: one axis per panel, one line per series of (x, y) points (training logs)."""
    data = {k: v for k, v in data.items() if any(len(pts) for pts in v.values())}
    if not data:
        return None
    ncols = min(3, len(data))
    nrows = math.ceil(len(data) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.7 * nrows), squeeze=False)
    for ax, (panel, series) in zip(axes.flat, data.items()):
        for name, pts in sorted(series.items()):
            pts = sorted(pts)
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o" if len(pts) < 30 else None, ms=3, lw=1.2, label=name)
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel((xlabels or {}).get(panel, "step"), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(data) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return to_data_uri(fig)


def hbar(points: list[dict], title: str, xlabel: str, *, xlim: tuple[float, float] | None = None) -> str | None:
    """Horizontal bars of labelled values with their interval (rows: label, value, lo, hi)."""
    v = pd.DataFrame(points)
    if v.empty:
        return None
    v = v[v["value"].notna()]
    if v.empty:
        return None
    vals = v["value"].to_numpy(float)
    lo, hi = v["lo"].to_numpy(float), v["hi"].to_numpy(float)
    xerr = np.nan_to_num(np.vstack([np.clip(vals - lo, 0, None), np.clip(hi - vals, 0, None)]))
    fig, ax = plt.subplots(figsize=(5.0, 0.28 * len(v) + 1.0))
    ax.barh(range(len(v)), vals, xerr=xerr, color="#4c72b0", capsize=2)
    ax.set_yticks(range(len(v)), [str(x) for x in v["label"]], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    if xlim:
        ax.set_xlim(*xlim)
    ax.axvline(0, color="black", lw=0.5)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return to_data_uri(fig)


def stacked_shares(rows: list[dict], title: str) -> str | None:
    """Stacked horizontal bars of shares (rows: label plus one value in 0-1 per outcome category)."""
    df = pd.DataFrame(rows)
    if df.empty:
        return None
    df = df.set_index("label")
    fig, ax = plt.subplots(figsize=(5.5, 0.35 * len(df) + 1.0))
    left = np.zeros(len(df))
    cmap = plt.get_cmap("Set2")
    for i, col in enumerate(df.columns):
        vals = df[col].astype(float).to_numpy()
        ax.barh(range(len(df)), vals, left=left, label=str(col), color=cmap(i % 8))
        left += vals
    ax.set_yticks(range(len(df)), [str(i) for i in df.index], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=min(4, len(df.columns)), loc="upper left", bbox_to_anchor=(0, -0.15))
    return to_data_uri(fig)


FIGURES: dict[str, Callable[..., str | None]] = {
    "bars": bars,
    "radar": radar,
    "per_round": per_round,
    "panels": panels,
    "hbar": hbar,
    "stacked_shares": stacked_shares,
}
