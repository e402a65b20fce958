"""Stage 1 data: training contexts and K sampled candidate replies per context and persona.

Candidates go through the model client (``cfg.sampler``: the base model, or a vLLM server), so they
are cached, rate-limited and counted like every other call. ``candidates.jsonl`` gets one line per
finished candidate; a rerun samples only the missing ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.base import GenerationParams
from ..backends.client import ClientSettings, get_client
from ..data.context import Context
from ..errors import UserError
from ..fileio import append_jsonl, read_jsonl, stable_hash
from ..personas import PersonaCard
from ..aio import run_sync
from .config import TrainConfig
from .prompts import clean_reply, opening_turns, speaker_messages


@dataclass
class TrainContext:
    task: str
    context: Context

    @property
    def key(self) -> str:
        return f"{self.task}:{self.context.id}"


def training_contexts(cfg: TrainConfig, data_dir: str | Path | None = None) -> list[TrainContext]:
    """``data.contexts`` contexts per task, disjoint from the task's evaluation sample when asked."""
    import random

    from ..data.loaders import load_contexts
    from ..taskspec import SampleSpec, load_task

    out: list[TrainContext] = []
    for name in cfg.data.tasks:
        task = load_task(name)
        pool = load_contexts(task.model_copy(update={"sample": SampleSpec(size=None, seed=task.sample.seed)}), data_dir)
        if cfg.data.exclude_eval_contexts:
            held = {c.id for c in load_contexts(task, data_dir)}
            pool = [c for c in pool if c.id not in held]
        pool.sort(key=lambda c: c.id)
        random.Random(stable_hash([cfg.data.seed, name])).shuffle(pool)
        chosen = pool[: cfg.data.contexts]
        if not chosen:
            why = " after leaving out its evaluation sample (set data.exclude_eval_contexts: false for a smoke test)" if cfg.data.exclude_eval_contexts else ""
            raise UserError(f"{cfg.file or 'config'}: field 'data.tasks': task '{name}' has no contexts to train on{why}")
        out.extend(TrainContext(name, c) for c in chosen)
    return out


def candidate_key(ctx: TrainContext, persona: str, k: int) -> str:
    return f"{ctx.key}:{persona}:{k}"


def sample_candidates(
    cfg: TrainConfig,
    contexts: list[TrainContext],
    cards: list[PersonaCard],
    out: Path,
    *,
    settings: ClientSettings | None = None,
) -> dict[str, int]:
    """Fill ``out`` with K candidates per (context, persona); returns {new, reused, failed}."""
    done = {r["key"] for r in read_jsonl(out)}
    s1 = cfg.stage1
    client = get_client(cfg.sampler, settings or ClientSettings(max_connections=cfg.max_connections))
    names = [c.name for c in cards]
    todo: list[tuple[TrainContext, PersonaCard, int]] = [
        (tc, card, k) for tc in contexts for card in cards for k in range(s1.candidates) if candidate_key(tc, card.id, k) not in done
    ]
    counts = {"new": 0, "reused": len(done), "failed": 0}

    async def one(tc: TrainContext, card: PersonaCard, k: int) -> None:
        others = [n for n in names if n != card.name]
        turns = opening_turns(tc.context)
        messages = speaker_messages(card, others, tc.context, turns)
        params = GenerationParams(
            max_tokens=s1.sampling.max_tokens,
            temperature=s1.sampling.temperature,
            top_p=s1.sampling.top_p,
            seed=int(stable_hash([cfg.seed, tc.key, card.id, k], 8), 16),
            sample_index=k,
        )
        try:
            resp = await client.chat(messages, params, tag="train:sample")
        except Exception as exc:  # a failed call is counted and retried on the next run, never written
            from ..backends.base import BackendError

            if not isinstance(exc, BackendError):
                raise
            counts["failed"] += 1
            return
        row: dict[str, Any] = {
            "key": candidate_key(tc, card.id, k),
            "task": tc.task,
            "context_id": tc.context.id,
            "persona": card.id,
            "agent": card.name,
            "k": k,
            "text": clean_reply(resp.text, card.name, others),
            "raw": resp.text,
            "finish_reason": resp.finish_reason,
            "model": cfg.sampler,
            "messages": messages,
            "history": turns,
        }
        append_jsonl(out, row)
        counts["new"] += 1

    async def all_() -> None:
        await asyncio.gather(*(one(*t) for t in todo))

    if todo:
        run_sync(all_())
    return counts
