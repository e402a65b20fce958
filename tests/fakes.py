"""A scripted model backend for tests: `fake/<name>` answers with a Python function of the request.

Register a responder with :func:`script` (or the ``fake_model`` fixture in conftest). The backend
goes through the real ModelClient (cache, limits, usage), so tests exercise the production path
without a model. Default responder: a deterministic reply derived from the last message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from mascot_eval.backends.base import BACKENDS, Backend, ChatRequest, ChatResponse, Usage

Responder = Callable[[ChatRequest], str]
RESPONDERS: dict[str, Responder] = {}
CALLS: dict[str, list[ChatRequest]] = {}


def default_responder(request: ChatRequest) -> str:
    last = request.messages[-1]["content"] if request.messages else ""
    h = hashlib.sha256(f"{last}|{request.params.sample_index}|{request.params.seed}".encode()).hexdigest()[:8]
    return f"reply {h} to: {last[-40:]}"


class FakeBackend(Backend):
    kind = "fake"

    def __init__(self, spec: str) -> None:
        name = spec.split("/", 1)[1] if "/" in spec else "default"
        super().__init__(spec, model=name)

    async def generate(self, request: ChatRequest) -> ChatResponse:
        CALLS.setdefault(self.model, []).append(request)
        text = RESPONDERS.get(self.model, default_responder)(request)
        return self._response(request, text, len(text.split()))

    def _response(self, request: ChatRequest, text: str, completion_tokens: int, **extra) -> ChatResponse:
        prompt_tokens = sum(len(m["content"].split()) for m in request.messages)
        return ChatResponse(
            text=text,
            finish_reason="stop",
            usage=Usage(prompt_tokens, completion_tokens),
            latency_s=0.0,
            model=self.spec,
            **extra,
        )


if "fake" not in BACKENDS:
    BACKENDS.add("fake", FakeBackend)


def script(name: str, responder: Responder) -> str:
    """Make `fake/<name>` answer with `responder`; returns the spec."""
    RESPONDERS[name] = responder
    CALLS.pop(name, None)
    return f"fake/{name}"


# -- choice scoring (judges with mode: logprob) ---------------------------------------------------
ProbResponder = Callable[[ChatRequest], list[dict[str, float]]]
PROB_RESPONDERS: dict[str, ProbResponder] = {}


class FakeChoiceBackend(FakeBackend):
    """`fakeprobs/<name>`: answers choice-scoring requests with a scripted probability row per prefill
    segment (like the local engine, without a model); plain requests as `fake/`."""

    kind = "fakeprobs"
    supports_choices = True

    async def generate(self, request: ChatRequest) -> ChatResponse:
        if not request.params.choices:
            return await super().generate(request)
        CALLS.setdefault(self.model, []).append(request)
        return self._response(request, "", 0, choice_probs=PROB_RESPONDERS[self.model](request))


if "fakeprobs" not in BACKENDS:
    BACKENDS.add("fakeprobs", FakeChoiceBackend)


def script_probs(name: str, responder: ProbResponder) -> str:
    """Make `fakeprobs/<name>` answer choice-scoring requests with `responder`; returns the spec."""
    PROB_RESPONDERS[name] = responder
    CALLS.pop(name, None)
    return f"fakeprobs/{name}"
