"""Imports the built-in backends so that they register themselves in BACKENDS.

Each entry is a factory ``spec -> Backend``; heavy modules (torch, vllm) load only when a spec of
that kind is used.
"""

from __future__ import annotations

from .base import BACKENDS, Backend


def _openai(spec: str) -> Backend:
    from .http import OpenAIBackend

    return OpenAIBackend(spec)


def _openai_compatible(spec: str) -> Backend:
    from .http import OpenAICompatibleBackend

    return OpenAICompatibleBackend(spec)


def _anthropic(spec: str) -> Backend:
    from .http import AnthropicBackend

    return AnthropicBackend(spec)


def _embedded(spec: str) -> Backend:
    from .local import EmbeddedBackend

    return EmbeddedBackend(spec)


def _hf(spec: str) -> Backend:
    from .local import HFBackend

    return HFBackend(spec)


def _vllm(spec: str) -> Backend:
    from .vllm_engine import VLLMBackend

    return VLLMBackend(spec)


for _name, _factory in {
    "openai": _openai,
    "openai-compatible": _openai_compatible,
    "anthropic": _anthropic,
    "embedded": _embedded,
    "hf": _hf,
    "vllm": _vllm,
}.items():
    if _name not in BACKENDS._items:
        BACKENDS.add(_name, _factory)
