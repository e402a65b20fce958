"""System configs (``baselines/<name>.yaml``): which system kind, templates, decoding and models.

A system *name* is a YAML file in ``baselines/`` (or a path to one); its ``kind`` names a Python
class in :data:`mascot_eval.systems.SYSTEMS` (built-ins: mascot, prompted, self-consistency,
multiagentesc; users add kinds through the ``mascot_eval.systems`` entry-point group). A registered
kind with no YAML file of the same name is usable by its name with its default config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .. import paths
from ..errors import UserError, did_you_mean
from ..fileio import stable_hash
from ..personas import PersonaCard
from ..yamlfile import load_model

CheckpointPart = Literal["personas", "director", "sft"]


class Decoding(BaseModel):
    """Decoding parameters of one role (agents, director, user simulator)."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(default=96, ge=1, le=8192)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)


class SystemConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    kind: str  # registry name of the Python class (SYSTEMS)
    description: str = ""
    # one agent with this card (the single-agent baseline); None = the task's persona group
    card: PersonaCard | None = None
    templates: dict[str, str] = Field(default_factory=dict)  # role -> template file (baselines/templates/)
    decoding: Decoding = Field(default_factory=Decoding)  # agents' turns
    history_turns: int = Field(default=8, ge=1, le=200)  # how many recent turns an agent prompt shows
    # role -> model spec; roles: "agents" (every speaker), a persona id, "director"
    models: dict[str, str] = Field(default_factory=dict)
    # which parts of a --checkpoint this system uses: persona adapters, the director adapter, an sft adapter
    checkpoint: list[CheckpointPart] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)  # kind-specific, validated by the kind's Options model

    # set by the loader
    file: str | None = Field(default=None, exclude=True)

    def base_hash(self) -> str:
        return stable_hash(self.model_dump(mode="json"))


def system_files(root: str | Path | None = None) -> dict[str, Path]:
    if not root:
        return paths.entries("baselines")  # the user folder's configs override the shipped ones by name
    root = Path(root)
    return {p.stem: p for p in sorted(root.glob("*.yaml"))} if root.is_dir() else {}


def load_config_file(path: str | Path) -> SystemConfig:
    path = Path(path)
    cfg = load_model(path, SystemConfig)
    if cfg.name != path.stem:
        raise UserError(f"{path}: field 'name' is {cfg.name!r} but the file is named {path.stem!r}; make them equal")
    cfg.file = str(path.resolve())
    return cfg


def load_system_config(name_or_path: str) -> SystemConfig:
    """A system name (``baselines/<name>.yaml`` or a registered kind) or a path to a YAML config."""
    from . import SYSTEMS

    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise UserError(f"{p}: system config file not found")
        return load_config_file(p)
    files = system_files()
    if name_or_path in files:
        return load_config_file(files[name_or_path])
    if name_or_path in SYSTEMS:
        return SystemConfig(name=name_or_path, kind=name_or_path)
    known = sorted(set(files) | set(SYSTEMS.names()))
    raise UserError(
        f"unknown system '{name_or_path}'{did_you_mean(name_or_path, known)}; known: {', '.join(known)} "
        "(see `mascot-eval systems list`)"
    )
