"""Build a ready-to-run System for one task from a system name or config."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..personas import get_group
from ..taskspec import TaskSpec
from . import SYSTEMS
from .base import System
from .checkpoint import Checkpoint, resolve_models
from .config import SystemConfig, load_system_config


def system_class(config: SystemConfig) -> type[System]:
    cls = SYSTEMS.get(config.kind) if config.kind in SYSTEMS else None
    if cls is None:
        raise UserError(
            f"{config.file or config.name}: field 'kind': unknown system kind '{config.kind}'; known kinds: "
            f"{', '.join(SYSTEMS.names())}"
        )
    if not (isinstance(cls, type) and issubclass(cls, System)):
        raise UserError(f"system kind '{config.kind}' ({cls!r}) is not a subclass of mascot_eval.systems.base.System")
    return cls


def build_system(
    system: str | SystemConfig,
    task: TaskSpec,
    *,
    model: str = "embedded",
    checkpoint: Checkpoint | None = None,
    personas_root: str | Path | None = None,
) -> System:
    config = system if isinstance(system, SystemConfig) else load_system_config(system)
    cls = system_class(config)
    if config.card is not None:
        cards, group = [config.card], f"{config.name}:{config.card.id}"
    else:
        g, cards = get_group(task.personas, personas_root)
        group = g.name
        if (
            checkpoint is not None
            and checkpoint.persona_group
            and "personas" in config.checkpoint
            and checkpoint.persona_group != group
        ):
            raise UserError(
                f"checkpoint {checkpoint.dir} was trained for persona group '{checkpoint.persona_group}' but task "
                f"'{task.name}' uses '{group}'; pick a matching task or checkpoint"
            )
    models = resolve_models(config, cards, default_model=model, checkpoint=checkpoint)
    return cls(config, cards, group, models)
