"""Which model spec samples for a role, locally (``<spec>#lora=DIR``) or through a vLLM server.

Without ``serving`` the trainer samples with ``sampling_model`` (default ``base_model``) and attaches
adapters as ``#lora=<folder>`` (embedded, ``hf/`` and in-process ``vllm/`` load them with PEFT / vLLM).

With ``serving: {url, model}`` every call goes to one vLLM OpenAI server started with LoRA enabled and
runtime adapter loading::

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve Qwen/Qwen3-8B --enable-lora --max-lora-rank 16 \\
        --max-loras 4 --port 8000

Each adapter the trainer needs (``adapters/sft`` for candidates, the persona adapters for Stage-2
speakers) is registered once with ``POST <url>/load_lora_adapter`` under the served name
``<prefix>-<adapter>-<content hash>`` (a retrained adapter gets a new name, so a stale one is never
used) and sampled as ``openai-compatible/<served name>@<url>``. ``--checkpoint DIR@<url>`` evaluates a
checkpoint the same way (:mod:`mascot_eval.systems.checkpoint`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from ..backends.spec import adapter_hash
from ..errors import UserError

_LOADED: set[tuple[str, str]] = set()


def served_name(prefix: str, adapter: str, folder: Path) -> str:
    return f"{prefix}-{adapter}-{adapter_hash(folder)[:8]}"


def load_adapter(url: str, name: str, folder: Path, *, timeout: float = 120.0) -> None:
    """Register ``folder`` at the vLLM server under ``name`` (once per process; 'already loaded' is fine)."""
    if (url, name) in _LOADED:
        return
    body = json.dumps({"lora_name": name, "lora_path": str(folder.resolve())}).encode()
    req = urllib.request.Request(
        url.rstrip("/") + "/load_lora_adapter", data=body, method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the user's own server URL
            resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        if "already" not in text.lower():
            raise UserError(
                f"serving.url {url}: loading adapter {folder} as '{name}' failed (HTTP {exc.code}: {text[:200]}); "
                "start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise UserError(
            f"serving.url {url}: cannot reach the vLLM server ({exc}); start it first (see docs/training.md)"
        ) from None
    _LOADED.add((url, name))


def role_spec(cfg, adapter: str | None, folder: Path | None) -> str:
    """The spec that samples for a role: the base (``adapter`` None) or base + that adapter."""
    if cfg.serving is None:
        return cfg.sampler if folder is None else f"{cfg.sampler}#lora={folder.resolve()}"
    s = cfg.serving
    if folder is None:
        return f"openai-compatible/{s.model}@{s.url}"
    name = served_name(s.prefix, adapter or folder.name, folder)
    load_adapter(s.url, name, folder)
    return f"openai-compatible/{name}@{s.url}"
