"""The training output folder: artifacts, step bookkeeping, ``checkpoint.json`` and ``train_log.jsonl``.

Layout::

    DIR/checkpoint.json          mascot-checkpoint/1: base model, adapters, hashes, judge, metrics, steps
    DIR/config.yaml              the config as run
    DIR/sft/data.jsonl           SFT examples (prompt rendered by the system, human reply)
    DIR/adapters/sft/            the SFT LoRA adapter (pi_SFT; the `sft` baseline uses it)
    DIR/stage1/rollouts.jsonl    the evaluated system's dialogues on the training contexts (Stage-1 states)
    DIR/stage1/candidates.jsonl  sampled replies (appended; resumable per row)
    DIR/stage1/judged.jsonl      judge scores per candidate (appended; resumable per row)
    DIR/stage1/pairs.jsonl       preference pairs after the delta filter
    DIR/reward_model/            Bradley-Terry reward model (trl RewardTrainer: peft LoRA + score head) and metrics
    DIR/adapters/<persona>/      Stage-1 LoRA adapters (peft folders)
    DIR/stage2/rollouts.jsonl    rollouts with the Stage-1 speakers (the Director's states)
    DIR/adapters/director/       Stage-2 Director LoRA adapter
    DIR/train_log.jsonl          losses, rewards, KL, reward-model accuracy, per logging step
    DIR/training_curves.png      the log plotted

A step is *done* when its artifact exists and ``checkpoint.json`` records it with the same input hash;
a rerun skips done steps. A step whose inputs changed is refused (one line naming what to delete),
so an output folder never mixes artifacts from two configs.
"""

from __future__ import annotations

import datetime as _dt
import shutil
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError
from ..fileio import append_jsonl, atomic_write_json, atomic_write_text, read_jsonl
from .config import TrainConfig
from .dist import is_main_process

SCHEMA = "mascot-checkpoint/1"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class TrainDir:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # paths
    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint.json"

    @property
    def log_path(self) -> Path:
        return self.root / "train_log.jsonl"

    @property
    def candidates(self) -> Path:
        return self.root / "stage1" / "candidates.jsonl"

    @property
    def judged(self) -> Path:
        return self.root / "stage1" / "judged.jsonl"

    @property
    def pairs(self) -> Path:
        return self.root / "stage1" / "pairs.jsonl"

    @property
    def reward_model(self) -> Path:
        return self.root / "reward_model"

    @property
    def rollouts(self) -> Path:
        return self.root / "stage2" / "rollouts.jsonl"

    def adapter(self, name: str) -> Path:
        return self.root / "adapters" / name

    # checkpoint.json
    def load(self) -> dict[str, Any]:
        if not self.checkpoint_path.exists():
            return {}
        import json

        try:
            data = json.loads(self.checkpoint_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise UserError(f"{self.checkpoint_path}: not valid JSON; delete it to retrain from the saved artifacts") from None
        if data.get("schema") != SCHEMA:
            raise UserError(f"{self.checkpoint_path}: schema is {data.get('schema')!r}, expected {SCHEMA!r}")
        return data

    def save(self, data: dict[str, Any]) -> None:
        """Write checkpoint.json; under a multi-process launcher only rank 0 writes (the others read it)."""
        data["schema"] = SCHEMA
        data["updated"] = _now()
        if is_main_process():
            atomic_write_json(self.checkpoint_path, data)

    def update(self, **fields: Any) -> dict[str, Any]:
        data = self.load()
        for k, v in fields.items():
            if isinstance(v, dict) and isinstance(data.get(k), dict):
                data[k] = {**data[k], **v}
            else:
                data[k] = v
        self.save(data)
        return data

    def start(self, cfg: TrainConfig, base: dict[str, Any]) -> dict[str, Any]:
        """Create or reopen the folder for ``cfg``; record base-model and config provenance."""
        self.root.mkdir(parents=True, exist_ok=True)
        data = self.load()
        if data and data.get("base_model") != cfg.base_model:
            raise UserError(
                f"{self.root}: was trained from base model {data.get('base_model')!r}, the config says "
                f"{cfg.base_model!r}; use a new --out folder"
            )
        if is_main_process():
            atomic_write_text(self.root / "config.yaml", yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
        data.setdefault("created", _now())
        data.update(
            {
                "base_model": cfg.base_model,
                "base_model_info": base,
                "persona_group": cfg.persona_group,
                "config_name": cfg.name,
                "config_file": cfg.file,
                "config_hash": cfg.config_hash(),
                "train_log": "train_log.jsonl",
                "served_base_model": cfg.serving.model if cfg.serving else None,
            }
        )
        data.setdefault("adapters", {})
        data.setdefault("steps", {})
        data.setdefault("metrics", {})
        self.save(data)
        return data

    # steps
    def step_done(self, name: str, inputs_hash: str, artifact: Path) -> bool:
        """True when ``name`` finished for these inputs and its artifact is present.

        Raises when the step finished for *other* inputs and its artifact is still there (it would be stale);
        once that artifact is deleted, as the refusal says, the step is simply not done.
        """
        rec = self.load().get("steps", {}).get(name)
        if rec is None or not artifact.exists():
            return False
        if rec.get("inputs") != inputs_hash:
            raise UserError(
                f"{self.root}: step '{name}' was done with different inputs (config or upstream data changed); "
                f"delete {artifact} (and the steps after it) or use a new --out folder"
            )
        return artifact.exists()

    def step_check(self, name: str, inputs_hash: str, artifact: Path) -> None:
        """Before resuming an incremental step: refuse partial artifacts written for other inputs."""
        rec = self.load().get("steps", {}).get(name)
        started = self.load().get("steps_started", {}).get(name)
        if rec is not None:
            self.step_done(name, inputs_hash, artifact)
        elif started is not None and started != inputs_hash and artifact.exists():
            raise UserError(
                f"{self.root}: a partial {artifact.name} from a different config is present; delete {artifact} "
                "or use a new --out folder"
            )
        self.update(steps_started={name: inputs_hash})

    def mark_done(self, name: str, inputs_hash: str, **info: Any) -> None:
        self.update(steps={name: {"inputs": inputs_hash, "finished": _now(), **info}})

    def reset_dir(self, path: Path) -> None:
        """Remove a folder left half-written by an interrupted step."""
        if path.exists():
            shutil.rmtree(path)

    # log
    def log(self, row: dict[str, Any]) -> None:
        if is_main_process():
            append_jsonl(self.log_path, {"time": _now(), **row})

    def log_rows(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.log_path))
