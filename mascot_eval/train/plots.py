"""Training curves from ``train_log.jsonl``: SFT loss, reward-model held-out accuracy (with its 95%
interval) per epoch, GRPO reward / KL / loss per adapter. :func:`curves` gives the series (the
report's training section plots them too); :func:`plot_training` writes ``training_curves.png``."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def curves(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """panel -> series name -> [(x, y)]: reward, kl, loss per GRPO adapter; accuracy per RM epoch; SFT loss."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {
        "reward": {},
        "kl": {},
        "loss": {},
        "reward model accuracy": {},
        "sft loss": {},
    }
    for r in rows:
        if r.get("step_name") == "grpo" and "step" in r:
            for panel in ("reward", "kl", "loss"):
                if isinstance(r.get(panel), (int, float)):
                    out[panel].setdefault(r["name"], []).append((int(r["step"]), float(r[panel])))
        elif r.get("step_name") == "reward_model":
            for key, label in (("train_acc", "train (running)"), ("heldout_accuracy", "held-out")):
                if isinstance(r.get(key), (int, float)):
                    out["reward model accuracy"].setdefault(label, []).append((float(r["epoch"]), float(r[key])))
            ci = r.get("heldout_ci95")
            if ci:
                out["reward model accuracy"].setdefault("held-out 95% low", []).append((float(r["epoch"]), float(ci[0])))
                out["reward model accuracy"].setdefault("held-out 95% high", []).append((float(r["epoch"]), float(ci[1])))
        elif r.get("step_name") == "sft" and isinstance(r.get("loss"), (int, float)):
            out["sft loss"].setdefault("sft", []).append((int(r["step"]), float(r["loss"])))
    return out


def plot_training(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Write a PNG with one panel per curve kind; None when the log has nothing to plot."""
    data = {k: v for k, v in curves(rows).items() if v}
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..fileio import atomic_write_bytes

    cols = 2
    nrows = (len(data) + 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(10, 3.4 * nrows), squeeze=False)
    for ax, (panel, series) in zip(axes.flat, data.items()):
        for name, pts in sorted(series.items()):
            xs, ys = zip(*pts)
            style = {"linestyle": ":", "marker": ""} if "95%" in name else {"marker": "o"}
            ax.plot(xs, ys, label=name, **style)
        if panel == "reward model accuracy":
            ax.axhline(0.5, color="grey", linewidth=0.8)
        ax.set_title(panel)
        ax.set_xlabel("epoch" if panel == "reward model accuracy" else "step")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(data) :]:
        ax.axis("off")
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path
