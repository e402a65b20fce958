"""Model spec strings: ``<backend>/<model>[@<endpoint>][#lora=<adapter-dir>]`` (or ``embedded``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

LORA_MARK = "#lora="


@dataclass(frozen=True)
class ParsedSpec:
    spec: str  # the full string as typed
    backend: str  # part before the first '/' ("embedded" when there is no slash)
    model: str  # part after the slash, without '@endpoint' and '#lora='
    endpoint: str | None
    lora: Path | None

    @property
    def base_spec(self) -> str:
        return self.spec.split(LORA_MARK, 1)[0]


def parse_spec(spec: str, *, allow_endpoint: bool = False, allow_lora: bool = False) -> ParsedSpec:
    if not spec or spec != spec.strip():
        raise UserError(f"model spec '{spec}': empty or has surrounding spaces")
    rest, lora = spec, None
    if LORA_MARK in rest:
        rest, lora_s = rest.split(LORA_MARK, 1)
        if not allow_lora:
            raise UserError(f"model spec '{spec}': LoRA adapters ({LORA_MARK}DIR) work only with embedded, hf/ and vllm/")
        if not lora_s:
            raise UserError(f"model spec '{spec}': empty adapter folder after {LORA_MARK}")
        lora = Path(lora_s).expanduser()
    elif "#" in rest:
        raise UserError(f"model spec '{spec}': unknown suffix after '#'; the only one is {LORA_MARK}<adapter-dir>")
    backend, _, model = rest.partition("/")
    endpoint = None
    if allow_endpoint and "@" in model:
        model, endpoint = model.rsplit("@", 1)
        if not endpoint.startswith(("http://", "https://")):
            raise UserError(f"model spec '{spec}': endpoint '{endpoint}' must start with http:// or https://")
    return ParsedSpec(spec=spec, backend=backend, model=model, endpoint=endpoint, lora=lora)


def adapter_hash(adapter_dir: Path) -> str:
    """Content hash of a PEFT adapter folder (config + weights), for cache keys and reload checks."""
    if not adapter_dir.is_dir():
        raise UserError(f"LoRA adapter folder {adapter_dir} does not exist; check the #lora= path or the checkpoint")
    if not (adapter_dir / "adapter_config.json").is_file():
        raise UserError(f"{adapter_dir}: no adapter_config.json; this is not a PEFT LoRA adapter folder")
    h = hashlib.sha256()
    for p in sorted(adapter_dir.iterdir()):
        if p.is_file() and (p.name == "adapter_config.json" or p.name.startswith("adapter_model")):
            h.update(p.name.encode())
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]
