"""Runs inside the vLLM venv (tests/test_vllm.py starts it): the in-process ``vllm/`` backend end to end.

Usage: ``python tests/vllm_child.py <model-dir> <lora-dir> <cache-dir>``; prints one JSON line
starting with ``RESULT `` that the test checks. Nothing is asserted here, so a failure shows up
in the test with the numbers that caused it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from mascot_eval.backends.base import BackendError, GenerationParams
from mascot_eval.backends.client import ClientSettings, ModelClient
from mascot_eval.backends.usage import LEDGER

PROMPTS = [
    "Name a fruit.",
    "What is the capital of France?",
    "Say hello to a friend.",
    "Count from one to five.",
]


def msgs(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def dump(resp) -> dict:
    return {
        "text": resp.text,
        "finish_reason": resp.finish_reason,
        "prompt_tokens": resp.usage.prompt_tokens,
        "completion_tokens": resp.usage.completion_tokens,
        "top_logprobs": resp.top_logprobs,
        "cached": resp.cached,
    }


async def main(model_dir: str, lora_dir: str, cache_dir: str) -> dict:
    out: dict = {}
    settings = ClientSettings(max_connections=8, cache_dir=cache_dir)
    base = ModelClient(f"vllm/{model_dir}", settings)
    greedy = GenerationParams(max_tokens=12, top_logprobs=3)

    t = time.perf_counter()
    first = await base.chat(msgs(PROMPTS[0]), greedy, tag="first")  # loads the engine
    out["load_and_first_s"] = time.perf_counter() - t
    t = time.perf_counter()
    rest = await asyncio.gather(*(base.chat(msgs(p), greedy, tag="base") for p in PROMPTS[1:]))
    out["concurrent_s"] = time.perf_counter() - t
    out["base"] = [dump(r) for r in [first, *rest]]
    out["base_calls"] = base.calls

    again = await asyncio.gather(*(base.chat(msgs(p), greedy, tag="again") for p in PROMPTS))
    out["again"] = [dump(r) for r in again]
    out["calls_after_again"] = base.calls

    # The same prompts through a random LoRA adapter, mixed in one batch with new base requests.
    lora = ModelClient(f"vllm/{model_dir}#lora={lora_dir}", settings)
    plain = GenerationParams(max_tokens=12)
    t = time.perf_counter()
    mixed = await asyncio.gather(
        *(lora.chat(msgs(p), plain, tag="lora") for p in PROMPTS),
        *(base.chat(msgs(p), plain, tag="base-plain") for p in PROMPTS),
    )
    out["lora_s"] = time.perf_counter() - t
    out["lora"] = [dump(r) for r in mixed[: len(PROMPTS)]]
    out["base_plain"] = [dump(r) for r in mixed[len(PROMPTS) :]]
    out["lora_calls"] = lora.calls

    # Sampling: sample_index gives distinct samples that a fresh, uncached client reproduces.
    def sampled(i: int) -> GenerationParams:
        return GenerationParams(max_tokens=16, temperature=1.0, seed=7, sample_index=i)

    s = await asyncio.gather(*(base.chat(msgs(PROMPTS[2]), sampled(i)) for i in range(3)))
    fresh = ModelClient(f"vllm/{model_dir}", ClientSettings(use_cache=False))
    s_again = await asyncio.gather(*(fresh.chat(msgs(PROMPTS[2]), sampled(i)) for i in range(3)))
    out["samples"] = [r.text for r in s]
    out["samples_again"] = [r.text for r in s_again]

    # A prompt longer than the context fails alone; the request batched with it still succeeds.
    long_prompt = "word " * 3000
    results = await asyncio.gather(
        fresh.chat(msgs(long_prompt), GenerationParams(max_tokens=4)),
        fresh.chat(msgs(PROMPTS[1]), GenerationParams(max_tokens=4)),
        return_exceptions=True,
    )
    out["long"] = [
        {"error": f"{type(r).__name__}: {r}", "backend_error": isinstance(r, BackendError)}
        if isinstance(r, BaseException)
        else dump(r)
        for r in results
    ]
    # Structured outputs: a JSON schema with an enum constrains the answer (what the Director's schema
    # mode sends), beside a request without one in the same batch.
    schema = {
        "type": "object",
        "properties": {"speaker": {"type": "string", "enum": ["Anchor", "Catalyst", "Beacon"]}},
        "required": ["speaker"],
        "additionalProperties": False,
    }
    constrained, free = await asyncio.gather(
        fresh.chat(
            msgs("Who speaks next, the Anchor, the Catalyst or the Beacon?"), GenerationParams(max_tokens=40, json_schema=schema)
        ),
        fresh.chat(msgs("Who speaks next, the Anchor, the Catalyst or the Beacon?"), GenerationParams(max_tokens=40)),
    )
    out["schema"] = {"constrained": dump(constrained), "free": dump(free), "supports": fresh.backend.supports_json_schema}
    out["batches"] = base.backend.engine().batches
    out["ledger"] = LEDGER.snapshot()["by_tag"]
    return out


if __name__ == "__main__":
    result = asyncio.run(main(*sys.argv[1:4]))
    print("RESULT " + json.dumps(result), flush=True)
