"""Types at the backend boundary and the backend registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

from ..registry import Registry


@dataclass(frozen=True)
class GenerationParams:
    """Decoding parameters. All of them (and only them) enter the cache key with the messages.

    ``sample_index`` makes the k-th sample of a sampled generation a distinct, reproducible cache
    entry: reruns get the same k samples back, and k samples stay k distinct samples.
    """

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    sample_index: int = 0
    logprobs: bool = False
    top_logprobs: int = 0
    json_schema: dict[str, Any] | None = None  # structured output where the provider supports it
    # Choice scoring instead of generation (backends with ``supports_choices``): the assistant turn
    # is the concatenation of the ``prefill`` segments, and after each segment (with no prefill: at
    # the start of the assistant turn) the backend reads the next-token probabilities of ``choices``
    # (single tokens, renormalised over the choices) into ``ChatResponse.choice_probs``; nothing is
    # generated. Used by judges with ``mode: logprob``.
    prefill: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ChatRequest:
    messages: list[dict[str, str]]  # [{"role": "system"|"user"|"assistant", "content": str}]
    params: GenerationParams = field(default_factory=GenerationParams)
    tag: str = ""  # who asks, for usage roll-ups: "system:mascot", "judge:gpt", "user-sim", ...


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class ChatResponse:
    text: str
    finish_reason: str  # "stop", "length", "error", ...
    usage: Usage
    latency_s: float
    model: str  # the spec that produced it
    top_logprobs: list[list[tuple[str, float]]] | None = None  # per generated token: [(token, logprob), ...]
    cached: bool = False
    cost_usd: float = 0.0
    retries: int = 0
    choice_probs: list[dict[str, float]] | None = None  # per prefill segment: {choice: probability}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = asdict(self.usage)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChatResponse:
        d = dict(d)
        d["usage"] = Usage(**d["usage"])
        if d.get("top_logprobs") is not None:
            d["top_logprobs"] = [[(tok, lp) for tok, lp in pos] for pos in d["top_logprobs"]]
        return cls(**d)


class Backend(ABC):
    """One model behind one API. Subclasses implement :meth:`generate`; no caching or retries here.

    ``spec`` is the user's string (``openai/gpt-4o``); ``cache_identity`` names what determines the
    output (backend kind, model, endpoint) and goes into the cache key; never secrets.
    """

    kind: str = "base"
    supports_choices: bool = False  # can answer choice-scoring requests (GenerationParams.choices)
    default_connections: int = 8  # calls in flight when the settings name none (--max-connections)
    supports_json_schema: bool = False  # constrains generation to GenerationParams.json_schema

    def __init__(self, spec: str, model: str, endpoint: str | None = None) -> None:
        self.spec = spec
        self.model = model
        self.endpoint = endpoint

    @property
    def cache_identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "endpoint": self.endpoint}

    @abstractmethod
    async def generate(self, request: ChatRequest) -> ChatResponse:
        """Produce one response. Raise :class:`BackendError` with ``retryable`` set on failure."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        return None

    def available(self) -> tuple[bool, str]:
        """Whether this backend is usable here (packages installed, keys present) and why not."""
        return True, "ok"


class BackendError(Exception):
    """A failed call. ``retryable`` for 429/5xx/timeouts/dropped connections; not for 400/401/403/404."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.retries = 0  # retries the client made before giving up (set on the error it finally raises)


# name (the part of a spec before the first '/') -> factory(spec: str) -> Backend
BACKENDS: Registry[Any] = Registry("backend", builtins_module="mascot_eval.backends.builtin")
