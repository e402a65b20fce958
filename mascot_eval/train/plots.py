"""Training curves from ``train_log.jsonl``: GRPO reward/KL/loss per adapter and reward-model accuracy."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def curves(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """panel -> series name -> [(x, y)]: reward, kl, loss per GRPO adapter; accuracy per RM epoch."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {"reward": {}, "kl": {}, "loss": {}, "reward model accuracy": {}}
    for r in rows:
        if r.get("step_name") == "grpo" and "step" in r:
            for panel in ("reward", "kl", "loss"):
                if isinstance(r.get(panel), (int, float)):
                    out[panel].setdefault(r["name"], []).append((int(r["step"]), float(r[panel])))
        elif r.get("step_name") == "reward_model":
            for key in ("train_acc", "heldout_acc"):
                if isinstance(r.get(key), (int, float)):
                    out["reward model accuracy"].setdefault(key, []).append((int(r["epoch"]), float(r[key])))
    return out


def plot_training(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """Write a 2x2 PNG of the curves; None when the log has nothing to plot."""
    data = curves(rows)
    if not any(data.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..fileio import atomic_write_bytes

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (panel, series) in zip(axes.flat, data.items()):
        for name, pts in sorted(series.items()):
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", label=name)
        ax.set_title(panel)
        ax.set_xlabel("epoch" if panel == "reward model accuracy" else "GRPO step")
        if series:
            ax.legend(fontsize=8)
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path
