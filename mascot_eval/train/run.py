"""``train sft|stage1|stage2|all``: run the stages, then record provenance, evidence and the training curves."""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from .basemodel import check_base
from .config import TrainConfig, personas_of
from .dist import is_main_process
from .evidence import learning_evidence
from .plots import plot_training
from .stage1 import Say, _quiet, prepare, run_sft_step, run_stage1
from .stage2 import run_stage2
from .workdir import TrainDir

STAGES = ("sft", "stage1", "stage2", "all")


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
    """Run ``stage`` (sft, stage1, stage2 or all; stage1 runs SFT first when it is not done); ``data_only``
    runs every step but GRPO (SFT, rollouts, sampling, judging, pairs, reward model; Stage-2 rollouts)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}")
    t0 = time.perf_counter()
    check_base(cfg.base_model)  # a base model that cannot load fails before anything is written
    if stage == "sft":
        td, _, _ = prepare(cfg, out, data_dir, say)
        run_sft_step(cfg, td, data_dir, say)
    if stage in ("stage1", "all"):
        run_stage1(cfg, out, data_dir=data_dir, settings=settings, say=say, data_only=data_only)
    if stage in ("stage2", "all") and not (data_only and stage == "all"):
        run_stage2(cfg, out, data_dir=data_dir, settings=settings, say=say, data_only=data_only)
    td = TrainDir(out)
    if not is_main_process():  # under accelerate only rank 0 writes the manifest and the plot
        return td.load()
    from ..runs.manifest import provenance

    rows = td.log_rows()
    png = plot_training(rows, td.root / "training_curves.png")
    seconds = round(time.perf_counter() - t0, 1)
    runs = td.load().get("runs", [])
    runs.append({"stage": stage, "seconds": seconds, "peak_rss_mb": round(peak_rss_mb(), 1)})
    evidence = learning_evidence(rows, [c.id for c in personas_of(cfg)])
    return td.update(
        provenance=provenance(), runs=runs, plots={"training_curves": png.name} if png else {}, metrics={"evidence": evidence}
    )
