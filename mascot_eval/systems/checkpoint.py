"""Trainer checkpoints (``--checkpoint DIR``) and which model each role of a system uses.

``DIR/checkpoint.json``: ``{"schema": "mascot-checkpoint/1", "base_model": "<spec>", "persona_group": ...,
"adapters": {"<persona id>": "adapters/<id>", ..., "director": "adapters/director"}}`` with PEFT LoRA
folders relative to DIR. A role served by an adapter uses the spec ``<base_model>#lora=<DIR/adapter>``.

``DIR@http://host:port/v1`` evaluates the checkpoint through a vLLM OpenAI server that serves its adapters
under their checkpoint names (``vllm serve <base> --enable-lora --lora-modules anchor=DIR/adapters/anchor ...``;
``mascot-eval train serve DIR`` prints the command): a role then uses ``openai-compatible/<name>@<url>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import sha256_file
from ..personas import PersonaCard
from .config import SystemConfig

SCHEMA = "mascot-checkpoint/1"


@dataclass
class Checkpoint:
    dir: Path
    base_model: str
    adapters: dict[str, str]
    persona_group: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    hash: str = ""
    serve_url: str | None = None  # adapters served by this vLLM OpenAI server under their names

    def adapter_dir(self, name: str, *, needed_by: str) -> Path:
        if name not in self.adapters:
            raise UserError(
                f"checkpoint {self.dir}: no adapter '{name}' (needed by {needed_by}); checkpoint.json adapters: "
                f"{', '.join(sorted(self.adapters)) or '(none)'}; train it (`mascot-eval train`) or pick another system"
            )
        path = (self.dir / self.adapters[name]).resolve()
        if not (path / "adapter_config.json").is_file():
            raise UserError(
                f"checkpoint {self.dir}: adapter '{name}' folder {path} has no adapter_config.json; "
                "it must be a PEFT LoRA folder written by the trainer"
            )
        return path

    @property
    def base_spec(self) -> str:
        """The base model for roles without an adapter: served by the same server when ``serve_url`` is set
        (vLLM's default served name is the model id or folder: ``hf/<id>`` -> ``<id>``)."""
        if not self.serve_url:
            return self.base_model
        served = self.raw.get("served_base_model") or self.base_model.split("/", 1)[-1]
        return f"openai-compatible/{served}@{self.serve_url}"

    def lora(self, name: str, *, needed_by: str) -> str:
        folder = self.adapter_dir(name, needed_by=needed_by)
        if self.serve_url:
            return f"openai-compatible/{name}@{self.serve_url}"
        return f"{self.base_model}#lora={folder}"


def load_checkpoint(path: str | Path) -> Checkpoint:
    """``DIR`` (adapters attached locally) or ``DIR@http(s)://host:port/v1`` (adapters served by that vLLM server)."""
    text, url = str(path), None
    for mark in ("@http://", "@https://"):
        if mark in text:
            text, rest = text.split(mark, 1)
            url = mark[1:] + rest
    d = Path(text).expanduser()
    f = d / "checkpoint.json"
    if not f.is_file():
        raise UserError(f"checkpoint {d}: no checkpoint.json; pass a folder written by `mascot-eval train`")
    try:
        raw = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{f}: not valid JSON ({exc.msg} at line {exc.lineno}); restore it or retrain") from None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise UserError(f"{f}: schema is {raw.get('schema') if isinstance(raw, dict) else None!r}, expected {SCHEMA!r}")
    base = raw.get("base_model")
    adapters = raw.get("adapters")
    if not isinstance(base, str) or not base:
        raise UserError(f"{f}: field 'base_model' must be a model spec such as 'embedded' or 'hf/<path>'")
    if not isinstance(adapters, dict) or not all(isinstance(v, str) for v in adapters.values()):
        raise UserError(f"{f}: field 'adapters' must map names (persona ids, 'director') to adapter folders")
    return Checkpoint(
        dir=d.resolve(),
        base_model=base,
        adapters=dict(adapters),
        persona_group=raw.get("persona_group"),
        raw=raw,
        hash=sha256_file(f)[:16],
        serve_url=url,
    )


def resolve_models(
    config: SystemConfig, cards: list[PersonaCard], *, default_model: str, checkpoint: Checkpoint | None
) -> dict[str, str]:
    """Role -> model spec: ``agent:<persona id>`` per speaker, ``director`` and ``aux`` (analyst, voters).

    Order per role: the checkpoint's adapter (when the config lists that part), the config's
    ``models`` entry (persona id, then ``agents``), then the base model (the checkpoint's base
    model when the system uses the checkpoint, else ``--model``).
    """
    uses = set(config.checkpoint) if checkpoint else set()
    base = checkpoint.base_spec if (checkpoint and uses) else default_model
    who = f"system '{config.name}'"
    if "sft" in config.checkpoint and checkpoint is None and "agents" not in config.models:
        raise UserError(
            f"system '{config.name}' needs a fine-tuned model: pass --checkpoint DIR (with an 'sft' adapter) or set "
            f"models.agents in {config.file or 'its config'}"
        )
    out: dict[str, str] = {}
    for c in cards:
        if "personas" in uses:
            out[f"agent:{c.id}"] = checkpoint.lora(c.id, needed_by=who)  # type: ignore[union-attr]
        elif "sft" in uses:
            out[f"agent:{c.id}"] = checkpoint.lora("sft", needed_by=who)  # type: ignore[union-attr]
        else:
            out[f"agent:{c.id}"] = config.models.get(c.id) or config.models.get("agents") or base
    if "director" in uses:
        out["director"] = checkpoint.lora("director", needed_by=who)  # type: ignore[union-attr]
    else:
        out["director"] = config.models.get("director") or base
    out["aux"] = config.models.get("aux") or config.models.get("agents") or base
    return out
