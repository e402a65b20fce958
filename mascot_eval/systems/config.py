"""System configs (``baselines/<name>.yaml``): which system kind, templates, decoding and models.

A system *name* is a YAML file in ``baselines/`` (or a path to one); its ``kind`` names a Python
class in :data:`mascot_eval.systems.SYSTEMS` (built-ins: mascot, prompted, self-consistency,
multiagentesc; users add kinds through the ``mascot_eval.systems`` entry-point group). A registered
kind with no YAML file of the same name is usable by its name with its default config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import paths
from ..errors import UserError, did_you_mean
from ..fileio import stable_hash
from ..personas import PersonaCard
from ..templating import check_name, compile_check
from ..yamlfile import YamlDoc, read_yaml, validate, validation_message

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
    """Read and check a system YAML: schema (strict types), kind, options, template names and files
    (inside the config's folder or baselines/templates/, syntax), model specs and the card. Nothing
    is rendered here (that needs a context: :func:`mascot_eval.checks.check_system`)."""
    path = Path(path)
    doc = read_yaml(path, what="a system config")
    cfg = validate(SystemConfig, doc.data, path, doc=doc)
    if cfg.name != path.stem:
        raise UserError(f"{path}: field 'name' is {cfg.name!r} but the file is named {path.stem!r}; make them equal")
    cfg.file = str(path.resolve())
    check_config(cfg, doc)
    return cfg


def _at(cfg: SystemConfig, doc: YamlDoc | None, loc: tuple[str, ...]) -> str:
    where = cfg.file or f"system '{cfg.name}'"
    line = doc.line_of(loc) if doc is not None else None
    return f"{where}:{line}" if line else where


def check_config(cfg: SystemConfig, doc: YamlDoc | None = None) -> None:
    """The static checks of :func:`load_config_file` (also for configs built in code)."""
    from ..backends.client import make_backend
    from ..personas import check_card_name
    from . import SYSTEMS
    from .templates import Templates

    if cfg.kind not in SYSTEMS:
        raise UserError(
            f"{_at(cfg, doc, ('kind',))}: field 'kind': unknown system kind '{cfg.kind}'"
            f"{did_you_mean(cfg.kind, SYSTEMS.names())}; known kinds: {', '.join(SYSTEMS.names())}"
        )
    cls = SYSTEMS.get(cfg.kind)
    options_model = getattr(cls, "Options", None)
    if options_model is not None:
        try:
            options_model.model_validate(cfg.options, strict=True)
        except ValidationError as exc:
            raise UserError(validation_message(cfg.file or cfg.name, exc, doc=doc, prefix=("options",))) from None
    roles = getattr(cls, "template_roles", {})
    unknown = sorted(set(cfg.templates) - set(roles))
    if unknown:
        raise UserError(
            f"{_at(cfg, doc, ('templates', unknown[0]))}: field 'templates': unknown role(s) "
            f"{', '.join(unknown)}; kind '{cfg.kind}' uses {', '.join(sorted(roles)) or 'none'}"
        )
    templates = Templates(cfg.file)
    for role in sorted(roles):
        name = cfg.templates.get(role, roles[role])
        field = f"templates.{role}"
        try:
            check_name(name)
            templates.path(name)
            compile_check(templates.env, name)
        except UserError as exc:
            raise UserError(f"{_at(cfg, doc, ('templates', role))}: field '{field}': {exc.message}") from None
    for role, spec in cfg.models.items():
        try:
            make_backend(spec)
        except UserError as exc:
            raise UserError(f"{_at(cfg, doc, ('models', role))}: field 'models.{role}': {exc.message}") from None
    if cfg.card is not None:
        check_card_name(cfg.card, cfg.file or cfg.name, doc.line_of(("card", "name")) if doc else None)
    hook = getattr(cls, "check_config", None)
    if hook is not None:
        hook(cfg, doc)


def load_system_config(name_or_path: str) -> SystemConfig:
    """A system name (``baselines/<name>.yaml`` or a registered kind) or a path to a YAML config."""
    from . import SYSTEMS

    if not name_or_path or not name_or_path.strip():
        raise UserError("--system: give a system name (see `mascot-eval systems list`) or a YAML path")
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.exists():
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
