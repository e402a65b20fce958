"""The embedded backend: SmolLM2-135M-Instruct through transformers (see :mod:`.modeldir`)."""

from __future__ import annotations

from .modeldir import embedded_model_dir, gguf_path  # noqa: F401
