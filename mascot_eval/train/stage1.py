"""Stage 1, Persona-Aware Behavioral Alignment: candidates -> judged -> pairs -> reward model -> GRPO per persona."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from ..errors import UserError
from ..fileio import atomic_write_jsonl, read_jsonl, stable_hash
from ..personas import PersonaCard
from .basemodel import base_info, load_tokenizer, resolve_base
from .config import TrainConfig, personas_of
from .grpo import is_main_process, run_grpo
from .judging import judge_candidates
from .pairs import build_pairs, split_heldout
from .prompts import clean_reply, completion_text, opening_turns, speaker_messages
from .rewards import composite_reward, format_reward
from .reward_model import RewardModel, rm_text, train_reward_model
from .sample import TrainContext, candidate_key, sample_candidates, training_contexts
from .workdir import TrainDir

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def judge_info(cfg: TrainConfig) -> dict[str, Any]:
    spec = cfg.judge_spec()
    info = {"name": spec.name, "model": spec.model, "spec_hash": spec.spec_hash}
    overrides = cfg.judge_overrides.model_dump(exclude_none=True)
    if overrides:
        info["overrides"] = overrides
    return info


def prepare(cfg: TrainConfig, out: Path, data_dir: str | Path | None) -> tuple[TrainDir, list[TrainContext], str]:
    """Open the output folder and pick the training contexts; returns (dir, contexts, contexts hash)."""
    td = TrainDir(out)
    td.start(cfg, base_info(cfg.base_model))
    contexts = training_contexts(cfg, data_dir)
    ctx_hash = stable_hash([tc.key for tc in contexts])
    td.update(data={"tasks": cfg.data.tasks, "contexts": len(contexts), "contexts_hash": ctx_hash},
              judge=judge_info(cfg))
    return td, contexts, ctx_hash


def _require_main(step: str) -> None:
    if not is_main_process():
        raise UserError(
            f"step '{step}' is not done yet; run the data steps in one process first "
            "(`mascot-eval train stage1 ...` without accelerate), then launch GRPO with accelerate"
        )


def persona_reward_fn(rm: RewardModel, card: PersonaCard, others: list[str], cfg: TrainConfig):
    """trl reward function: composite of reward-model score and format reward; logs both parts."""
    r = cfg.stage1.reward

    def persona_reward(prompts, completions, rm_prefix, log_metric=None, **kwargs):  # noqa: ARG001 - trl passes extras
        raws = [completion_text(c) for c in completions]
        replies = [clean_reply(x, card.name, others) for x in raws]
        rms = rm.score([p + " ".join(y.split()) for p, y in zip(rm_prefix, replies)])
        fmts = [format_reward(x, card.name, others, r.max_words) for x in raws]
        if log_metric is not None:
            log_metric("rm_score", sum(rms) / len(rms))
            log_metric("format", sum(fmts) / len(fmts))
        return [composite_reward(a, b, rm_weight=r.rm_weight, format_weight=r.format_weight) for a, b in zip(rms, fmts)]

    return persona_reward


def run_stage1(
    cfg: TrainConfig,
    out: str | Path,
    *,
    data_dir: str | Path | None = None,
    settings: ClientSettings | None = None,
    say: Say = _quiet,
    data_only: bool = False,
) -> dict[str, Any]:
    """Run the Stage 1 steps not yet done; ``data_only`` stops after the reward model (no GRPO)."""
    out = Path(out)
    td, contexts, ctx_hash = prepare(cfg, out, data_dir)
    settings = settings or ClientSettings(max_connections=cfg.max_connections)
    cards = personas_of(cfg)
    by_id = {c.id: c for c in cards}
    names = [c.name for c in cards]
    s1 = cfg.stage1
    wanted = {candidate_key(tc, c.id, k) for tc in contexts for c in cards for k in range(s1.candidates)}

    # 1. candidates
    h_cand = stable_hash([cfg.section_hash("base_model", "sampling_model", "persona_group", "personas", "seed",
                                           "stage1.candidates", "stage1.sampling"), ctx_hash])
    if td.step_done("candidates", h_cand, td.candidates):
        say(f"stage1 candidates: done ({td.candidates})")
    else:
        _require_main("candidates")
        td.step_check("candidates", h_cand, td.candidates)
        c = sample_candidates(cfg, contexts, cards, td.candidates, settings=settings)
        say(f"stage1 candidates: {c['new']} sampled, {c['reused']} reused, {c['failed']} failed")
        if c["failed"]:
            raise UserError(f"stage1: {c['failed']} candidate calls failed (see above); rerun the same command to retry them", exit_code=1)
        td.mark_done("candidates", h_cand, rows=len(wanted))
    candidates = [r for r in read_jsonl(td.candidates) if r["key"] in wanted]

    # 2. judged
    judge = judge_info(cfg)
    h_judge = stable_hash([h_cand, judge])
    if td.step_done("judged", h_judge, td.judged):
        say(f"stage1 judged: done ({td.judged})")
    else:
        _require_main("judged")
        td.step_check("judged", h_judge, td.judged)
        j = judge_candidates(cfg.judge_spec(), candidates, by_id, td.judged, settings=settings)
        say(f"stage1 judged: {j['new']} new, {j['reused']} reused; {j['scored']} scored, {j['unscored']} unscored by '{cfg.judge}'")
        td.mark_done("judged", h_judge, scored=j["scored"], unscored=j["unscored"])
    judged = [r for r in read_jsonl(td.judged) if r["key"] in wanted]

    # 3. pairs
    h_pairs = stable_hash([h_judge, s1.delta, s1.reward_model.heldout_fraction, cfg.seed])
    if td.step_done("pairs", h_pairs, td.pairs):
        pairs = list(read_jsonl(td.pairs))
        say(f"stage1 pairs: done ({len(pairs)} pairs)")
    else:
        _require_main("pairs")
        texts = {c["key"]: c["text"] for c in candidates}
        pairs, st = build_pairs(judged, texts, s1.delta)
        if st.kept < s1.min_pairs:
            raise UserError(
                f"{cfg.file or 'config'}: stage1: too few preference pairs: {st.explain(s1.delta)}; stage1.min_pairs is "
                f"{s1.min_pairs}: sample more candidates or contexts, lower stage1.delta, or use a stronger judge"
            )
        cand = {c["key"]: c for c in candidates}
        for p in pairs:
            card = by_id[p["persona"]]
            p["chosen_text"] = rm_text(card, cand[p["chosen_key"]]["history"], p["chosen"])
            p["rejected_text"] = rm_text(card, cand[p["rejected_key"]]["history"], p["rejected"])
        pairs = split_heldout(pairs, s1.reward_model.heldout_fraction, cfg.seed)
        atomic_write_jsonl(td.pairs, pairs)
        td.mark_done("pairs", h_pairs, **st.to_dict())
        td.update(metrics={"stage1_pairs": st.to_dict()})
        say(f"stage1 pairs: {st.explain(s1.delta)}")

    # 4. reward model
    base_path = resolve_base(cfg.base_model)
    h_rm = stable_hash([h_pairs, cfg.section_hash("stage1.reward_model")])
    if td.step_done("reward_model", h_rm, td.reward_model / "head.safetensors"):
        say(f"stage1 reward model: done ({td.reward_model})")
    else:
        _require_main("reward_model")
        td.reset_dir(td.reward_model)
        rm, m = train_reward_model(base_path, cfg.base_model, s1.reward_model, pairs, seed=cfg.seed, log=td.log)
        tmp = td.reward_model.with_name(".reward_model.tmp")
        td.reset_dir(tmp)
        rm.save(tmp, m)
        tmp.rename(td.reward_model)
        td.mark_done("reward_model", h_rm, **m)
        td.update(metrics={"reward_model": m})
        acc = "n/a (no held-out pairs)" if m["heldout_acc"] is None else f"{m['heldout_acc']:.3f} on {m['heldout_pairs']}"
        say(f"stage1 reward model: train acc {m['train_acc']:.3f} on {m['train_pairs']} pairs, held-out acc {acc}")
        del rm
    if data_only:
        return td.load()

    # 5. GRPO per persona
    h_policy = cfg.section_hash("stage1.grpo", "stage1.lora", "stage1.reward")
    rm_loaded: RewardModel | None = None
    tok = None
    results: dict[str, Any] = {}
    for card in cards:
        dest = td.adapter(card.id)
        h_ad = stable_hash([h_rm, h_policy, card.id, ctx_hash])
        if td.step_done(f"adapter:{card.id}", h_ad, dest / "adapter_config.json"):
            say(f"stage1 adapter {card.id}: done ({dest})")
            td.update(adapters={card.id: f"adapters/{card.id}"})
            continue
        if rm_loaded is None:
            rm_loaded = RewardModel.load(td.reward_model)
            tok = load_tokenizer(base_path, cfg.base_model)
        others = [n for n in names if n != card.name]
        rows = []
        for tc in contexts:
            turns = opening_turns(tc.context)
            rows.append({"prompt": speaker_messages(card, others, tc.context, turns), "rm_prefix": rm_text(card, turns, ""),
                         "context": tc.key})
        dest.parent.mkdir(parents=True, exist_ok=True)
        res = run_grpo(
            name=card.id, stage="stage1", base_path=base_path, base_spec=cfg.base_model, tokenizer=tok, rows=rows,
            reward_fn=persona_reward_fn(rm_loaded, card, others, cfg), spec=s1.grpo, lora=s1.lora, out_dir=dest,
            seed=cfg.seed, log=td.log,
        )
        results[card.id] = res
        if is_main_process():
            td.mark_done(f"adapter:{card.id}", h_ad, **{k: v for k, v in res.items() if k != "final"})
            td.update(adapters={card.id: f"adapters/{card.id}"}, metrics={f"adapter:{card.id}": res})
        say(f"stage1 adapter {card.id}: {res['steps']} GRPO steps in {res['seconds']} s, "
            f"trainable {res['trainable_pct']:.3f}% ({res['trainable_params']:,} of {res['total_params']:,})")
    return td.load()
