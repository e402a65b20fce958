"""``train stage1|stage2|all``: run the stages, then record provenance and plot the training curves."""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from .basemodel import check_base
from .config import TrainConfig
from .grpo import is_main_process
from .plots import plot_training
from .stage1 import Say, _quiet, run_stage1
from .stage2 import run_stage2
from .workdir import TrainDir

STAGES = ("stage1", "stage2", "all")


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def train(
    cfg: TrainConfig,
    out: str | Path,
    stage: str,
    *,
    data_dir: str | Path | None = None,
    settings: ClientSettings | None = None,
    say: Say = _quiet,
    data_only: bool = False,
) -> dict[str, Any]:
    """Run ``stage`` (stage1, stage2 or all); ``data_only`` runs only the steps that call models
    through the client (sampling, judging, pairs, reward model, rollouts), not GRPO."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}")
    t0 = time.perf_counter()
    check_base(cfg.base_model)  # a base model that cannot load fails before anything is written
    if stage in ("stage1", "all"):
        run_stage1(cfg, out, data_dir=data_dir, settings=settings, say=say, data_only=data_only)
    if stage in ("stage2", "all") and not (data_only and stage == "all"):
        run_stage2(cfg, out, data_dir=data_dir, settings=settings, say=say, data_only=data_only)
    td = TrainDir(out)
    if not is_main_process():  # under accelerate only rank 0 writes the manifest and the plot
        return td.load()
    from ..runs.manifest import provenance

    png = plot_training(td.log_rows(), td.root / "training_curves.png")
    seconds = round(time.perf_counter() - t0, 1)
    runs = td.load().get("runs", [])
    runs.append({"stage": stage, "seconds": seconds, "peak_rss_mb": round(peak_rss_mb(), 1)})
    return td.update(provenance=provenance(), runs=runs, plots={"training_curves": png.name} if png else {})
