"""The model client every caller uses: backend + cache + limits + retries + usage accounting.

Public API (stable; systems, judges and the trainer code against it):

    settings = ClientSettings(max_connections=8)
    client = get_client("embedded", settings)
    resp = await client.chat([{"role": "user", "content": "hi"}], GenerationParams(max_tokens=32), tag="judge:local")
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ..errors import UserError, did_you_mean
from .base import BACKENDS, Backend, ChatRequest, ChatResponse, GenerationParams


@dataclass(frozen=True)
class ClientSettings:
    max_connections: int = 8
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_retries: int = 6
    timeout_s: float = 300.0
    use_cache: bool = True
    cache_dir: str | None = None


def backend_name(spec: str) -> str:
    return spec.split("/", 1)[0] if "/" in spec else spec


def make_backend(spec: str) -> Backend:
    name = backend_name(spec)
    if name not in BACKENDS:
        raise UserError(
            f"unknown model spec '{spec}': backend '{name}'{did_you_mean(name, BACKENDS.names())} is not one of "
            f"{', '.join(BACKENDS.names())}"
        )
    return BACKENDS.get(name)(spec)


class ModelClient:
    def __init__(self, spec: str, settings: ClientSettings | None = None, backend: Backend | None = None) -> None:
        self.spec = spec
        self.settings = settings or ClientSettings()
        self.backend = backend or make_backend(spec)
        self._sem = asyncio.Semaphore(self.settings.max_connections)

    async def chat(
        self, messages: list[dict[str, str]], params: GenerationParams | None = None, *, tag: str = ""
    ) -> ChatResponse:
        req = ChatRequest(messages=messages, params=params or GenerationParams(), tag=tag)
        async with self._sem:
            t0 = time.perf_counter()
            resp = await self.backend.generate(req)
            resp.latency_s = resp.latency_s or (time.perf_counter() - t0)
            return resp

    async def aclose(self) -> None:
        await self.backend.aclose()


_CLIENTS: dict[tuple[str, ClientSettings], ModelClient] = {}


def get_client(spec: str, settings: ClientSettings | None = None) -> ModelClient:
    """One client per (spec, settings) in a process, so limits and batching are shared."""
    key = (spec, settings or ClientSettings())
    if key not in _CLIENTS:
        _CLIENTS[key] = ModelClient(spec, key[1])
    return _CLIENTS[key]
