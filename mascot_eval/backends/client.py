"""The model client every caller uses: backend + cache + limits + retries + usage accounting.

Public API (stable; systems, judges and the trainer code against it):

    settings = ClientSettings(max_connections=8)
    client = get_client("embedded", settings)
    resp = await client.chat([{"role": "user", "content": "hi"}], GenerationParams(max_tokens=32), tag="judge:local")

``chat`` returns a :class:`ChatResponse` or raises :class:`BackendError` (the call failed for
good; its message names the cause and the retries) or :class:`RunStopped` (``--cost-limit`` or
``--fail-on-error`` was passed; raised before a new call starts, so finished work is kept).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError, did_you_mean
from . import usage
from .base import BACKENDS, Backend, BackendError, ChatRequest, ChatResponse, GenerationParams
from .cache import ResponseCache, cache_key, open_cache
from .limits import TokenBucket, backoff_delay, estimate_tokens
from .prices import call_cost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientSettings:
    max_connections: int | None = None  # None: the backend's default_connections (API 8, local models 64)
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_retries: int = 6
    timeout_s: float = 300.0
    use_cache: bool = True
    cache_dir: str | None = None
    cost_limit: float | None = None  # dollars for the whole process (all clients); None = no limit
    fail_on_error: float | None = None  # stop when the share of failed calls passes this; None = never
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_connections is not None and self.max_connections < 1:
            raise UserError(f"--max-connections must be at least 1, got {self.max_connections}")
        for name in ("requests_per_minute", "tokens_per_minute", "cost_limit"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise UserError(f"{name.replace('_', '-')} must be positive, got {v}")
        if self.fail_on_error is not None and not 0 <= self.fail_on_error <= 1:
            raise UserError(f"--fail-on-error is a share between 0 and 1, got {self.fail_on_error}")


def backend_name(spec: str) -> str:
    """The backend kind of a spec: the part before the first '/' (after dropping a '#lora=' suffix)."""
    return spec.split("#", 1)[0].split("/", 1)[0]


def check_spec(spec: str) -> str:
    """The backend kind of ``spec``; a UserError with a did-you-mean when no backend has that name."""
    name = backend_name(spec)
    if name not in BACKENDS:
        raise UserError(
            f"unknown model spec '{spec}': backend '{name}'{did_you_mean(name, BACKENDS.names())} is not one of "
            f"{', '.join(BACKENDS.names())}"
        )
    return name


def make_backend(spec: str) -> Backend:
    return BACKENDS.get(check_spec(spec))(spec)


def connections(settings: ClientSettings | None, backend: Backend) -> int:
    """Calls in flight for one model: ``--max-connections`` when given, else the backend's default."""
    given = settings.max_connections if settings else None
    return given if given is not None else backend.default_connections


class _LoopState:
    """asyncio primitives belong to one event loop; a client used from several loops gets one set each."""

    def __init__(self, settings: ClientSettings, backend: Backend) -> None:
        self.sem = asyncio.Semaphore(connections(settings, backend))
        self.rpm = TokenBucket(settings.requests_per_minute) if settings.requests_per_minute else None
        self.tpm = TokenBucket(settings.tokens_per_minute) if settings.tokens_per_minute else None
        self.inflight: dict[str, asyncio.Future[ChatResponse]] = {}


class ModelClient:
    def __init__(self, spec: str, settings: ClientSettings | None = None, backend: Backend | None = None) -> None:
        self.spec = spec
        self.settings = settings or ClientSettings()
        self.backend = backend or make_backend(spec)
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self.calls = 0  # model calls actually sent (attempts, retries included)

    @property
    def cache(self) -> ResponseCache | None:
        return open_cache(self.settings.cache_dir) if self.settings.use_cache else None

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self._states.get(loop)
        if st is None:
            st = self._states[loop] = _LoopState(self.settings, self.backend)
        return st

    def key(self, messages: list[dict[str, str]], params: GenerationParams) -> str:
        return cache_key(self.backend.cache_identity, messages, params)

    async def chat(
        self, messages: list[dict[str, str]], params: GenerationParams | None = None, *, tag: str = ""
    ) -> ChatResponse:
        params = params or GenerationParams()
        _check_messages(messages)
        if params.choices and not self.backend.supports_choices:
            raise UserError(
                f"model '{self.spec}' cannot score choices from next-token probabilities (judge mode: logprob); "
                "use a local transformers model (embedded or hf/<path>) or mode: generate"
            )
        s = self.settings
        usage.check_limits(s.cost_limit, s.fail_on_error)
        key = self.key(messages, params)
        cache = self.cache
        t0 = time.perf_counter()
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                hit = replace(hit, cached=True, retries=0, cost_usd=0.0, latency_s=time.perf_counter() - t0)
                usage.LEDGER.record(spec=self.spec, tag=tag, cached=True)
                return hit
        st = self._state()
        if key in st.inflight:  # the same request is already on its way: share its answer
            resp = await asyncio.shield(st.inflight[key])
            usage.LEDGER.record(spec=self.spec, tag=tag, cached=True)
            return replace(resp, cached=True, retries=0, cost_usd=0.0)
        fut: asyncio.Future[ChatResponse] = asyncio.get_running_loop().create_future()
        st.inflight[key] = fut
        try:
            resp = await self._call(ChatRequest(messages=messages, params=params, tag=tag), st)
        except BaseException as exc:
            if not fut.done():
                if isinstance(exc, Exception):
                    fut.set_exception(exc)
                    fut.exception()  # retrieved: no "never retrieved" warning when nobody shares it
                else:
                    fut.cancel()
            raise
        else:
            fut.set_result(resp)
        finally:
            st.inflight.pop(key, None)
        if cache is not None and resp.finish_reason != "error":
            cache.put(key, self.spec, resp)
        return resp

    async def _call(self, req: ChatRequest, st: _LoopState) -> ChatResponse:
        s = self.settings
        attempt = 0
        while True:
            if st.rpm is not None:
                await st.rpm.acquire(1)
            if st.tpm is not None:
                await st.tpm.acquire(estimate_tokens(req.messages, req.params.max_tokens))
            async with st.sem:
                usage.check_limits(s.cost_limit, s.fail_on_error)
                t0 = time.perf_counter()
                self.calls += 1
                try:
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the answer of a call that
                    # completes as the caller is cancelled and swallows the cancel (Ctrl-C, SIGTERM), so a
                    # stopped run could go on and hang; the timeout context re-raises the cancel
                    async with asyncio.timeout(s.timeout_s):
                        resp = await self.backend.generate(req)
                    err = None
                except TimeoutError:
                    err = BackendError(f"timed out after {s.timeout_s:g} s", retryable=True)
                except BackendError as exc:
                    err = exc
            if err is None:
                resp.latency_s = resp.latency_s or (time.perf_counter() - t0)
                resp.retries = attempt
                resp.cached = False
                resp.cost_usd = call_cost(
                    self.spec, resp.usage.prompt_tokens, resp.usage.completion_tokens, cost_limit=s.cost_limit
                )
                usage.LEDGER.record(
                    spec=self.spec,
                    tag=req.tag,
                    retries=attempt,
                    prompt_tokens=resp.usage.prompt_tokens,
                    completion_tokens=resp.usage.completion_tokens,
                    cost_usd=resp.cost_usd,
                    latency_s=resp.latency_s,
                )
                return resp
            if not err.retryable or attempt >= s.max_retries:
                usage.LEDGER.record(spec=self.spec, tag=req.tag, failed=True, retries=attempt)
                why = "not retried" if not err.retryable else f"gave up after {attempt} retries"
                status = f"HTTP {err.status}: " if err.status else ""
                final = BackendError(f"{self.spec}: {status}{err} ({why})", retryable=False, status=err.status)
                final.retries = attempt
                raise final from err
            delay = backoff_delay(attempt, base=s.backoff_base_s, cap=s.backoff_max_s, retry_after=err.retry_after)
            log.info("%s: %s; retry %d in %.2f s", self.spec, err, attempt + 1, delay)
            attempt += 1
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        await self.backend.aclose()


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    for m in messages:
        if (
            not isinstance(m, dict)
            or m.get("role") not in ("system", "user", "assistant")
            or not isinstance(m.get("content"), str)
        ):
            raise ValueError(f"bad message {m!r}: need role system/user/assistant and string content")


_CLIENTS: dict[tuple[str, ClientSettings], ModelClient] = {}


def get_client(spec: str, settings: ClientSettings | None = None) -> ModelClient:
    """One client per (spec, settings) in a process, so limits and batching are shared."""
    key = (spec, settings or ClientSettings())
    if key not in _CLIENTS:
        _CLIENTS[key] = ModelClient(spec, key[1])
    return _CLIENTS[key]


async def close_clients() -> None:
    """Close every client's backend (HTTP sessions); engines of local models stay loaded."""
    for client in list(_CLIENTS.values()):
        await client.aclose()
