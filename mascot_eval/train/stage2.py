"""Stage 2, Collaborative Dialogue Optimization: Director rollouts of N-turn blocks, GRPO on the Director.

1. Rollouts (``stage2/rollouts.jsonl``): for each training context, the untrained Director (base
   model) directs a block of N agent turns after the user's opening; the Stage-1 speakers (base +
   their LoRA adapter, through the model client) answer. An invalid directive is replaced by the
   fallback (first agent not yet heard) and counted.
2. GRPO: every prefix of every block is a Director state (conversation so far, who has spoken). For
   each sampled directive the chosen Stage-1 speaker answers, and the block up to that turn is scored:

       reward = judge_weight * group_rubric(block)       (judges' group criteria, mean, scaled 1-5 -> 0-1)
              + format_weight * directive_format
              - eta * (speaker redundancy + content redundancy)      (see :mod:`.diversity`)

   An invalid directive gets the worst judge term (0) and the worst penalty (2). A block the judge
   leaves unscored gets the mean judge term of its scored siblings (same state), so it neither helps
   nor hurts; unscored blocks are counted in the log (``unscored``), never read as zero.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..backends.base import GenerationParams
from ..backends.client import ClientSettings, get_client
from ..errors import UserError
from ..fileio import append_jsonl, read_jsonl, stable_hash
from ..personas import PersonaCard
from ..transcript import Transcript, Turn
from ..aio import run_sync
from .basemodel import load_tokenizer, resolve_base
from .config import TrainConfig, personas_of
from .diversity import block_redundancy
from .grpo import is_main_process, run_grpo
from .prompts import (
    clean_reply,
    completion_text,
    director_messages,
    fallback_directive,
    opening_turns,
    parse_directive,
    speaker_messages,
)
from .rewards import directive_format_reward
from .sample import TrainContext
from .stage1 import Say, _quiet, _require_main, prepare
from .workdir import TrainDir


def speaker_spec(cfg: TrainConfig, td: TrainDir, card: PersonaCard) -> str:
    return f"{cfg.sampler}#lora={td.adapter(card.id).resolve()}"


class Speakers:
    """Generates a Stage-1 speaker's turn for a directive, through the model client."""

    def __init__(self, cfg: TrainConfig, td: TrainDir, cards: list[PersonaCard], settings: ClientSettings) -> None:
        self.cfg, self.td, self.cards, self.settings = cfg, td, cards, settings
        self.by_name = {c.name: c for c in cards}
        self.names = [c.name for c in cards]

    async def turn(self, ctx: TrainContext, turns: list[dict[str, str]], directive: dict[str, str]) -> str:
        card = self.by_name[directive["speaker"]]
        others = [n for n in self.names if n != card.name]
        sp = self.cfg.stage2.speaker_sampling
        params = GenerationParams(
            max_tokens=sp.max_tokens, temperature=sp.temperature, top_p=sp.top_p,
            seed=int(stable_hash([self.cfg.seed, ctx.key, len(turns), directive], 8), 16),
        )
        client = get_client(speaker_spec(self.cfg, self.td, card), self.settings)
        resp = await client.chat(speaker_messages(card, others, ctx.context, turns, directive), params, tag="train:speaker")
        return clean_reply(resp.text, card.name, others)


async def rollout_block(
    cfg: TrainConfig, ctx: TrainContext, cards: list[PersonaCard], speakers: Speakers, settings: ClientSettings
) -> dict[str, Any]:
    """One N-turn block directed by the base Director (fallback on invalid directives)."""
    names = [c.name for c in cards]
    turns = opening_turns(ctx.context)
    directives, invalid = [], []
    director = get_client(cfg.sampler, settings)
    ds = cfg.stage2.director_sampling
    for j in range(cfg.stage2.block_turns):
        spoken = [t["speaker"] for t in turns if t["speaker"] != "user"]
        params = GenerationParams(max_tokens=ds.max_tokens, temperature=ds.temperature, top_p=ds.top_p,
                                  seed=int(stable_hash([cfg.seed, ctx.key, "director", j], 8), 16))
        resp = await director.chat(director_messages(cards, ctx.context, turns, spoken), params, tag="train:director")
        d, reason = parse_directive(resp.text, names)
        if d is None:
            invalid.append({"step": j, "reason": reason, "raw": resp.text[:300]})
            d = fallback_directive(names, spoken)
        directives.append(d)
        turns.append({"speaker": d["speaker"], "text": await speakers.turn(ctx, turns, d)})
    return {"key": ctx.key, "task": ctx.task, "context_id": ctx.context.id, "turns": turns, "directives": directives,
            "invalid": invalid}


def block_transcript(ctx: TrainContext, turns: list[dict[str, str]], cards: list[PersonaCard], group: str, tag: str) -> Transcript:
    from ..taskspec import load_task

    task = load_task(ctx.task)
    return Transcript(
        dialogue_id=f"train:{ctx.key}:{tag}", task=ctx.task, task_version=task.version, split=task.split,
        domain=task.domain, context_id=ctx.context.id, system="mascot-train", system_config_hash="train",
        persona_group=group, agents=[c.name for c in cards],
        turns=[Turn(round=1, speaker=t["speaker"], text=t["text"]) for t in turns],
        context=ctx.context.to_dict(), personas={c.name: c.model_dump() for c in cards},
    )


def group_term(rows: list[dict[str, Any]], criteria: list[str]) -> float | None:
    """Mean of the chosen group criteria on 1-5, scaled to 0-1; None when the judge scored none of them."""
    vals = [r["score"] for r in rows if r["criterion"] in criteria and r.get("score") is not None]
    if not vals:
        return None
    return (sum(vals) / len(vals) - 1.0) / 4.0


def impute_unscored(terms: list[float | None], groups: list[str]) -> list[float | None]:
    """Replace each None by the mean of the scored terms with the same group key (None if there are none)."""
    by: dict[str, list[float]] = {}
    for t, g in zip(terms, groups):
        if t is not None:
            by.setdefault(g, []).append(t)
    return [t if t is not None else (sum(by[g]) / len(by[g]) if by.get(g) else None) for t, g in zip(terms, groups)]


def director_reward_fn(
    cfg: TrainConfig, cards: list[PersonaCard], contexts: dict[str, TrainContext], speakers: Speakers,
    judge: Callable[[Transcript], Any],
):
    """trl reward function for Director completions (see the module docstring for the formula)."""
    r = cfg.stage2.reward
    names = [c.name for c in cards]

    def director_reward(prompts, completions, context, prefix_json, log_metric=None, **kwargs):  # noqa: ARG001
        raws = [completion_text(c) for c in completions]
        parsed = [parse_directive(x, names)[0] for x in raws]
        fmts = [directive_format_reward(x, names) for x in raws]
        prefixes = [json.loads(p) for p in prefix_json]

        async def one(i: int) -> tuple[float | None, float]:
            d = parsed[i]
            if d is None:
                return 0.0, 2.0
            ctx, prefix = contexts[context[i]], prefixes[i]
            text = await speakers.turn(ctx, prefix, d)
            block_turns = [*prefix, {"speaker": d["speaker"], "text": text}]
            agent_turns = [(t["speaker"], t["text"]) for t in block_turns if t["speaker"] != "user"]
            red = block_redundancy(agent_turns, names, r.ngram)
            t = block_transcript(ctx, block_turns, cards, cfg.persona_group, stable_hash([raws[i], prefix], 10))
            rows = await judge(t)
            return group_term(rows, r.criteria), red.penalty

        async def all_():
            return await asyncio.gather(*(one(i) for i in range(len(raws))))

        results = run_sync(all_())
        raw_terms = [j for j, _ in results]
        unscored = sum(1 for j, d in zip(raw_terms, parsed) if j is None and d is not None)
        terms = impute_unscored(raw_terms, [p for p in prefix_json])
        pens = [p for _, p in results]
        out = []
        for j, f, pen in zip(terms, fmts, pens):
            out.append(r.judge_weight * (j if j is not None else 0.0) + r.format_weight * f - r.diversity_weight * pen)
        if log_metric is not None:
            valid = [i for i, d in enumerate(parsed) if d is not None]
            log_metric("invalid_directive", 1 - len(valid) / len(raws))
            log_metric("unscored_blocks", unscored / max(1, len(valid)))
            if valid:
                log_metric("redundancy", sum(pens[i] for i in valid) / len(valid))
            scored = [j for j in raw_terms if j is not None]
            if scored:
                log_metric("group_judge", sum(scored) / len(scored))
        # a state whose judge term stayed None for every sibling keeps only format and redundancy terms
        return out

    return director_reward


def run_stage2(
    cfg: TrainConfig,
    out: str | Path,
    *,
    data_dir: str | Path | None = None,
    settings: ClientSettings | None = None,
    say: Say = _quiet,
    data_only: bool = False,
) -> dict[str, Any]:
    """Run the Stage 2 steps not yet done; ``data_only`` stops after the rollouts (no GRPO)."""
    out = Path(out)
    td, contexts, ctx_hash = prepare(cfg, out, data_dir)
    settings = settings or ClientSettings(max_connections=cfg.max_connections)
    cards = personas_of(cfg)
    missing = [c.id for c in cards if not (td.adapter(c.id) / "adapter_config.json").is_file()]
    if missing:
        raise UserError(
            f"{out}: stage2 needs the Stage-1 adapters; missing {', '.join(missing)}: run "
            f"`mascot-eval train stage1 --config {cfg.file or 'CONFIG'} --out {out}` first"
        )
    steps = td.load().get("steps", {})
    speaker_hash = stable_hash([steps.get(f"adapter:{c.id}", {}).get("inputs") for c in cards])
    speakers = Speakers(cfg, td, cards, settings)
    by_key = {tc.key: tc for tc in contexts}

    # 1. rollouts
    h_roll = stable_hash([speaker_hash, ctx_hash, cfg.section_hash("seed", "sampling_model", "stage2.block_turns",
                                                                    "stage2.director_sampling", "stage2.speaker_sampling")])
    if td.step_done("rollouts", h_roll, td.rollouts):
        say(f"stage2 rollouts: done ({td.rollouts})")
    else:
        _require_main("rollouts")
        td.step_check("rollouts", h_roll, td.rollouts)
        done = {r["key"] for r in read_jsonl(td.rollouts)}
        todo = [tc for tc in contexts if tc.key not in done]

        async def roll(tc: TrainContext) -> None:
            append_jsonl(td.rollouts, await rollout_block(cfg, tc, cards, speakers, settings))

        async def all_() -> None:
            await asyncio.gather(*(roll(tc) for tc in todo))

        if todo:
            run_sync(all_())
        rows = [r for r in read_jsonl(td.rollouts) if r["key"] in by_key]
        n_dir = sum(len(r["directives"]) for r in rows)
        n_bad = sum(len(r["invalid"]) for r in rows)
        td.mark_done("rollouts", h_roll, blocks=len(rows), directives=n_dir, invalid=n_bad)
        td.update(metrics={"stage2_rollouts": {"blocks": len(rows), "directives": n_dir, "invalid_directives": n_bad}})
        say(f"stage2 rollouts: {len(todo)} new blocks of {cfg.stage2.block_turns} turns, {len(done)} reused; "
            f"{n_bad} of {n_dir} base-Director directives invalid (fallback used)")
    rollouts = [r for r in read_jsonl(td.rollouts) if r["key"] in by_key]
    if data_only:
        return td.load()

    # 2. GRPO on the Director
    dest = td.adapter("director")
    from ..judges.score import judge_transcript

    judge_spec = cfg.judge_spec()
    h_dir = stable_hash([h_roll, cfg.judge, cfg.judge_overrides.model_dump(exclude_none=True),
                         cfg.section_hash("stage2.grpo", "stage2.lora", "stage2.reward")])
    if td.step_done("adapter:director", h_dir, dest / "adapter_config.json"):
        say(f"stage2 director adapter: done ({dest})")
        td.update(adapters={"director": "adapters/director"})
        return td.load()
    rows = []
    for ro in rollouts:
        tc = by_key[ro["key"]]
        turns = ro["turns"]
        for j in range(cfg.stage2.block_turns):
            prefix = turns[: 1 + j]  # the opening user turn plus j agent turns
            spoken = [t["speaker"] for t in prefix if t["speaker"] != "user"]
            rows.append({"prompt": director_messages(cards, tc.context, prefix, spoken), "context": tc.key,
                         "prefix_json": json.dumps(prefix, ensure_ascii=False)})

    async def judge(t: Transcript):
        return await judge_transcript(judge_spec, t, levels=("group",), settings=settings, cards=cards)

    base_path = resolve_base(cfg.base_model)
    tok = load_tokenizer(base_path, cfg.base_model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    res = run_grpo(
        name="director", stage="stage2", base_path=base_path, base_spec=cfg.base_model, tokenizer=tok, rows=rows,
        reward_fn=director_reward_fn(cfg, cards, by_key, speakers, judge), spec=cfg.stage2.grpo, lora=cfg.stage2.lora,
        out_dir=dest, seed=cfg.seed, log=td.log,
    )
    if is_main_process():
        td.mark_done("adapter:director", h_dir, **{k: v for k, v in res.items() if k != "final"})
        td.update(adapters={"director": "adapters/director"}, metrics={"adapter:director": res})
    say(f"stage2 director adapter: {res['steps']} GRPO steps in {res['seconds']} s, trainable {res['trainable_pct']:.3f}%")
    return td.load()
