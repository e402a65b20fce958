"""The policy's base model: spec -> local folder or hub id, loading, LoRA settings, trainable share."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import UserError
from .config import LoraSpec


def resolve_base(spec: str) -> str:
    """``embedded`` -> the converted SmolLM2 folder; ``hf/<path-or-id>`` -> that path or hub id."""
    if "#" in spec:
        raise UserError(f"base_model '{spec}': give the plain base model; adapters are what training produces")
    if spec == "embedded":
        from ..backends.modeldir import embedded_model_dir

        return str(embedded_model_dir())
    backend, _, model = spec.partition("/")
    if backend == "hf" and model:
        path = Path(model).expanduser()
        return str(path.resolve()) if path.exists() else model
    raise UserError(
        f"base_model '{spec}': training needs a local transformers model: 'embedded' or 'hf/<path-or-hub-id>' "
        "(sample through vLLM with sampling_model: vllm/<id>)"
    )


def check_base(spec: str) -> str:
    """Fail early (one line, before anything is written) when the base model's config or tokenizer
    cannot be loaded; returns the resolved path or hub id."""
    path = resolve_base(spec)
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"base_model '{spec}': cannot load the model from {path} ({_first_line(exc)}); give a local transformers "
            "folder (config.json, tokenizer, weights) or a hub id that is cached or can be downloaded"
        ) from None
    load_tokenizer(path, spec)
    return path


def load_tokenizer(path: str, spec: str):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"base_model '{spec}': cannot load its tokenizer from {path} ({_first_line(exc)})") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if getattr(tok, "chat_template", None) is None:
        raise UserError(f"base_model '{spec}': the tokenizer has no chat template; use an instruct/chat model")
    return tok


def load_causal_lm(path: str, spec: str, *, bf16: bool = False):
    import torch
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if bf16 else torch.float32)
    except (OSError, ValueError) as exc:
        raise UserError(f"base_model '{spec}': cannot load the model from {path} ({_first_line(exc)})") from None


def base_info(spec: str) -> dict[str, Any]:
    """What identifies the base model in the checkpoint's provenance (path, config hash)."""
    from ..fileio import sha256_file

    path = resolve_base(spec)
    info: dict[str, Any] = {"spec": spec, "path": path}
    cfg = Path(path) / "config.json"
    if cfg.is_file():
        info["config_sha256"] = sha256_file(cfg)[:16]
        for name in ("model.safetensors", "model.safetensors.index.json"):
            if (Path(path) / name).is_file():
                info["weights_file"] = name
                info["weights_sha256"] = (
                    sha256_file(Path(path) / name)[:16] if name.endswith("index.json") else _size_key(Path(path) / name)
                )
                break
    return info


def _size_key(path: Path) -> str:
    st = path.stat()
    return f"size={st.st_size}"


def lora_config(spec: LoraSpec, *, task_type: str = "CAUSAL_LM"):
    from peft import LoraConfig

    return LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=list(spec.target_modules),
        task_type=task_type,
        bias="none",
    )


def trainable_share(model) -> dict[str, Any]:
    """Trainable and total parameter counts and the trainable share in percent."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable_params": int(trainable), "total_params": int(total), "trainable_pct": 100.0 * trainable / max(total, 1)}


def check_targets(model, spec: LoraSpec, where: str) -> None:
    """Fail early (one line) when a LoRA target module name matches nothing in the model."""
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    missing = [t for t in spec.target_modules if t not in names]
    if missing:
        linear = sorted(n for n in names if n.endswith("proj"))
        raise UserError(
            f"{where}: LoRA target module(s) {', '.join(missing)} not in the model; it has {', '.join(linear) or 'no *proj modules'}"
        )


def set_threads() -> None:
    """Use the cores we have (torch defaults can oversubscribe small CI machines)."""
    import torch

    n = os.cpu_count() or 1
    if torch.get_num_threads() > n:
        torch.set_num_threads(n)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
