"""SFT, then Stage 1 (Persona-Aware Behavioral Alignment): rollouts -> candidates -> judged -> pairs ->
reward model -> GRPO per persona. Every step is resumable and refused when its inputs changed."""

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
from .rewards import completion_text, composite_reward, format_reward
from .sample import TrainContext, candidate_key, rollout_states, run_rollouts, sample_candidates, training_contexts
from .serving import role_spec
from .view import State, SystemView
from .workdir import TrainDir

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def judge_info(cfg: TrainConfig) -> dict[str, Any]:
    spec = cfg.judge_spec()
    info: dict[str, Any] = {
        "name": spec.name,
        "model": spec.model,
        "mode": spec.mode,
        "spec_hash": spec.spec_hash,
        "evaluation_judges": cfg.eval_judge_names(),
    }
    overrides = cfg.judge_overrides.model_dump(exclude_none=True)
    if overrides:
        info["overrides"] = overrides
    return info


def prepare(
    cfg: TrainConfig, out: str | Path, data_dir: str | Path | None, say: Say = _quiet
) -> tuple[TrainDir, list[TrainContext], str]:
    """Open the output folder and pick the training contexts; returns (dir, contexts, contexts hash)."""
    td = TrainDir(out)
    td.start(cfg, base_info(cfg.base_model))
    contexts = training_contexts(cfg, data_dir)
    ctx_hash = stable_hash([[tc.key, tc.profile] for tc in contexts])
    warning = cfg.judge_warning()
    if warning:
        say(warning)
    td.update(
        data={"tasks": cfg.data.tasks, "contexts": len(contexts), "contexts_hash": ctx_hash},
        judge=judge_info(cfg),
        warnings=[warning] if warning else [],
    )
    return td, contexts, ctx_hash


def _require_main(step: str) -> None:
    if not is_main_process():
        raise UserError(
            f"step '{step}' is not done yet; run the data steps in one process first "
            "(`mascot-eval train stage1 --data-only ...` without accelerate), then launch GRPO with accelerate"
        )


def sft_adapter(cfg: TrainConfig, td: TrainDir) -> Path | None:
    """The pi_SFT adapter folder (None when the config has no SFT stage)."""
    return td.adapter("sft") if cfg.sft.enabled else None


def run_sft_step(cfg: TrainConfig, td: TrainDir, data_dir: str | Path | None, say: Say) -> None:
    """SFT data (``sft/data.jsonl``) and the ``sft`` adapter; skipped when done for the same inputs."""
    if not cfg.sft.enabled:
        return
    from .sft import run_sft, sft_examples

    cards = personas_of(cfg)
    h_data = stable_hash([cfg.section_hash("sft.data", "sft.system", "system", "persona_group", "personas", "seed")])
    data_path = td.root / "sft" / "data.jsonl"
    if td.step_done("sft_data", h_data, data_path):
        rows = list(read_jsonl(data_path))
        say(f"sft data: done ({len(rows)} examples)")
    else:
        _require_main("sft_data")
        from ..personas import get_group

        _, group_cards = get_group(cfg.persona_group)
        rows, stats = sft_examples(cfg, data_dir, [c for c in group_cards if c in cards] or group_cards)
        atomic_write_jsonl(data_path, rows)
        td.mark_done("sft_data", h_data, **stats)
        td.update(metrics={"sft_data": stats})
        say(f"sft data: {stats['examples']} human replies from {stats['conversations']} conversations ({stats['per_task']})")
    dest = td.adapter("sft")
    h_sft = stable_hash(
        [
            h_data,
            cfg.section_hash(
                "base_model",
                "sft.epochs",
                "sft.learning_rate",
                "sft.batch_size",
                "sft.gradient_accumulation_steps",
                "sft.max_length",
                "sft.lora",
            ),
        ]
    )
    if td.step_done("adapter:sft", h_sft, dest / "adapter_config.json"):
        say(f"sft adapter: done ({dest})")
        td.update(adapters={"sft": "adapters/sft"})
        return
    base_path = resolve_base(cfg.base_model)
    tok = load_tokenizer(base_path, cfg.base_model)
    res = run_sft(cfg=cfg, base_path=base_path, tokenizer=tok, rows=rows, out_dir=dest, log=td.log)
    if is_main_process():
        td.mark_done("adapter:sft", h_sft, **res)
        td.update(adapters={"sft": "adapters/sft"}, metrics={"adapter:sft": res})
    say(
        f"sft adapter: {res['examples']} examples x {res['epochs']} epochs in {res['seconds']} s, final loss "
        f"{res['final_loss']}, trainable {res['trainable_pct']:.3f}%"
    )


def views_for(cfg: TrainConfig, td: TrainDir, contexts: list[TrainContext], speakers: dict[str, str]) -> dict[str, SystemView]:
    """The evaluated system per task, its speakers on ``speakers`` (persona id -> spec), the Director on the base."""
    out: dict[str, SystemView] = {}
    for tc in contexts:
        if tc.task.name not in out:
            out[tc.task.name] = SystemView.build(
                cfg.system_ref,
                tc.task,
                models={**speakers, "director": role_spec(cfg, None, None)},
                model=role_spec(cfg, None, None),
            )
    return out


def eligible_states(states: list[State], cards: list[PersonaCard], views: dict[str, SystemView]) -> list[State]:
    """Each rollout state as its speaker saw it, plus the same point offered to every other trained persona the
    Director could have picked (not yet heard this round), with the Director's default directive for that
    persona (what the evaluation Director falls back to; see :func:`.stage2.chosen_directive`)."""
    from dataclasses import replace

    from .stage2 import chosen_directive

    out: list[State] = []
    for st in states:
        out.append(st)
        view = views[st.task.name]
        if getattr(view.system, "director", None) is None:
            continue
        for card in cards:
            if card.name == st.speaker or card.name in st.spoken:
                continue
            out.append(replace(st, speaker=card.name, directive=chosen_directive(card).to_dict(), key=f"{st.key}@{card.id}"))
    return out


class StateBaseline:
    """The reward model's view of pi_SFT at each state: the mean score of its candidates there and the pooled
    within-state sd. A Bradley-Terry reward model is identified only up to a constant per prompt, and that
    constant varies by several units between states: GRPO's group advantages ignore it, but the mean reward
    logged per step would mostly say which states the step drew. Centred on this baseline, the logged reward is
    the policy's gain over pi_SFT's own replies to the same prompts (0 = no better than pi_SFT). When the
    candidates show no spread within any state (every score equal), the sd is 1: the term is the plain
    difference, since there is no scale to divide by."""

    def __init__(self, means: dict[str, float], sd: float) -> None:
        self.means, self.sd = means, sd

    @classmethod
    def from_candidates(cls, scorer, candidates: list[dict[str, Any]]) -> StateBaseline:
        import statistics
        from collections import defaultdict

        scores = scorer.score([list(c["messages"]) for c in candidates], [c["text"] for c in candidates])
        by: dict[str, list[float]] = defaultdict(list)
        for c, s in zip(candidates, scores):
            by[c["state"]].append(s)
        means = {k: statistics.fmean(v) for k, v in by.items()}
        ss = sum((x - means[k]) ** 2 for k, v in by.items() for x in v)
        dof = sum(len(v) - 1 for v in by.values())
        sd = (ss / dof) ** 0.5 if dof > 0 and ss > 0 else 1.0
        return cls(means, sd)

    def center(self, states: list[str], raw: list[float]) -> list[float]:
        missing = sorted({s for s in states if s not in self.means})
        if missing:
            raise UserError(f"stage1: GRPO state {missing[0]} has no pi_SFT candidates to centre its reward on")
        return [(x - self.means[s]) / self.sd for s, x in zip(states, raw)]


def persona_reward_fn(
    scorer, card: PersonaCard, others: list[str], cfg: TrainConfig, view: SystemView, baseline: StateBaseline | None = None
):
    """trl reward function: rm_weight * RM term + format_weight * format reward; logs both parts. The RM term is
    the raw score, or with ``baseline`` its gain over pi_SFT's candidates at the row's state (``state`` column)."""
    r = cfg.stage1.reward

    def persona_reward(prompts, completions, log_metric=None, state=None, **kwargs):  # noqa: ARG001 - trl passes extras
        raws = [completion_text(c) for c in completions]
        replies = [view.clean(x, card) for x in raws]
        rms = scorer.score([list(p) for p in prompts], replies)
        if baseline is not None:
            if state is None:
                raise ValueError("persona_reward: a centred reward needs the rows' 'state' column")
            rms = baseline.center(list(state), rms)
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
    """Run SFT and the Stage 1 steps not yet done; ``data_only`` stops after the reward model (no GRPO)."""
    out = Path(out)
    td, contexts, ctx_hash = prepare(cfg, out, data_dir, say)
    settings = settings or ClientSettings(max_connections=cfg.max_connections)
    cards = personas_of(cfg)
    by_id = {c.id: c for c in cards}
    s1 = cfg.stage1

    # 0. SFT: pi_SFT samples the candidates and speaks in the rollouts
    run_sft_step(cfg, td, data_dir, say)
    sft = sft_adapter(cfg, td)
    sft_hash = td.load().get("steps", {}).get("adapter:sft", {}).get("inputs") if sft else None
    pi_sft = role_spec(cfg, "sft", sft)

    # 1. rollouts of the evaluated system on the training contexts
    from ..personas import get_group

    _, group_cards = get_group(cfg.persona_group)
    views = views_for(cfg, td, contexts, {c.id: pi_sft for c in group_cards})
    rollouts = td.root / "stage1" / "rollouts.jsonl"
    h_roll = stable_hash(
        [
            cfg.section_hash("base_model", "sampling_model", "system", "persona_group", "seed", "stage1.rollouts"),
            ctx_hash,
            sft_hash,
            {k: v.system.config_hash() for k, v in sorted(views.items())},
        ]
    )
    if td.step_done("rollouts", h_roll, rollouts):
        say(f"stage1 rollouts: done ({rollouts})")
    else:
        _require_main("rollouts")
        td.step_check("rollouts", h_roll, rollouts)
        c = run_rollouts(cfg, contexts, views, role_spec(cfg, None, None), rollouts, settings=settings, seed=cfg.seed)
        say(f"stage1 rollouts: {c['new']} dialogues of '{cfg.system}', {c['reused']} reused")
        td.mark_done("rollouts", h_roll, dialogues=c["new"] + c["reused"])
    states = rollout_states(
        rollouts,
        contexts,
        {c.name for c in cards} if not s1.eligible_speakers else set(views[contexts[0].task.name].system.agents),
    )
    if s1.eligible_speakers:
        states = eligible_states(states, cards, views)
    states = [st for st in states if st.speaker in {c.name for c in cards}]
    if not states:
        raise UserError(f"{td.root}: the rollouts have no turn by the trained personas ({', '.join(by_id)}); check 'personas'")

    # 2. candidates: K replies per state from pi_SFT
    view0 = next(iter(views.values()))
    wanted = {candidate_key(st, view0.speaker_card(st).id, k) for st in states for k in range(s1.candidates)}
    h_cand = stable_hash(
        [h_roll, cfg.section_hash("personas", "seed", "stage1.candidates", "stage1.sampling"), [st.key for st in states]]
    )
    if td.step_done("candidates", h_cand, td.candidates):
        say(f"stage1 candidates: done ({td.candidates})")
    else:
        _require_main("candidates")
        td.step_check("candidates", h_cand, td.candidates)
        c = {"new": 0, "reused": 0, "failed": 0}
        for name, view in views.items():
            got = sample_candidates(
                cfg, [st for st in states if st.task.name == name], view, pi_sft, td.candidates, settings=settings
            )
            for k in c:
                c[k] += got[k]
        say(
            f"stage1 candidates: {c['new']} sampled from {pi_sft.split('#')[0]}{' + sft' if sft else ''}, "
            f"{len(states)} states; {c['failed']} failed"
        )
        if c["failed"]:
            raise UserError(f"stage1: {c['failed']} candidate calls failed; rerun the same command to retry them", exit_code=1)
        td.mark_done("candidates", h_cand, rows=len(wanted), states=len(states))
    candidates = [r for r in read_jsonl(td.candidates) if r["key"] in wanted]

    # 3. judged (the training judge)
    judge = judge_info(cfg)
    h_judge = stable_hash([h_cand, {k: v for k, v in judge.items() if k != "evaluation_judges"}])
    if td.step_done("judged", h_judge, td.judged):
        say(f"stage1 judged: done ({td.judged})")
    else:
        _require_main("judged")
        td.step_check("judged", h_judge, td.judged)
        j = judge_candidates(cfg.judge_spec(), candidates, by_id, td.judged, settings=settings)
        say(
            f"stage1 judged: {j['new']} new, {j['reused']} reused; {j['scored']} scored, {j['unscored']} unscored by '{cfg.judge}'"
        )
        td.mark_done("judged", h_judge, scored=j["scored"], unscored=j["unscored"])
    judged = [r for r in read_jsonl(td.judged) if r["key"] in wanted]

    # 4. pairs
    h_pairs = stable_hash([h_judge, s1.delta, s1.reward_model.heldout_fraction, cfg.seed])
    if td.step_done("pairs", h_pairs, td.pairs):
        pairs = list(read_jsonl(td.pairs))
        say(f"stage1 pairs: done ({len(pairs)} pairs)")
    else:
        _require_main("pairs")
        texts = {c["key"]: c["text"] for c in candidates}
        pairs, st = build_pairs(judged, texts, s1.delta)
        where = cfg.file or "config"
        if st.kept < s1.min_pairs:
            raise UserError(
                f"{where}: stage1: too few preference pairs: {st.explain(s1.delta)}; stage1.min_pairs is "
                f"{s1.min_pairs}: sample more candidates or contexts, lower stage1.delta, or use a stronger judge"
            )
        short = {p: st.per_persona.get(p, 0) for p in by_id if st.per_persona.get(p, 0) < s1.min_pairs_per_persona}
        if short:
            listed = ", ".join(f"{p} {n}" for p, n in short.items())
            raise UserError(
                f"{where}: stage1: persona(s) with too few preference pairs to train ({listed}; "
                f"stage1.min_pairs_per_persona is {s1.min_pairs_per_persona}): {st.explain(s1.delta)}; sample more, lower "
                "stage1.delta, or leave the persona out of 'personas'"
            )
        cand = {c["key"]: c for c in candidates}
        for p in pairs:
            p["messages"] = cand[p["chosen_key"]]["messages"]
        pairs = split_heldout(pairs, s1.reward_model.heldout_fraction, cfg.seed)
        atomic_write_jsonl(td.pairs, pairs)
        td.mark_done("pairs", h_pairs, **st.to_dict())
        td.update(metrics={"stage1_pairs": st.to_dict()})
        say(f"stage1 pairs: {st.explain(s1.delta)}; per persona {st.per_persona}")

    # 5. reward model (trl RewardTrainer + peft)
    rm_spec = s1.reward_model
    rm_base_spec = rm_spec.base_model or cfg.base_model
    h_rm = stable_hash([h_pairs, cfg.section_hash("stage1.reward_model")])
    if td.step_done("reward_model", h_rm, td.reward_model / "rm_config.json"):
        say(f"stage1 reward model: done ({td.reward_model})")
    else:
        _require_main("reward_model")
        from .reward_model import train_reward_model

        from .reward_model import encoder_path

        m = train_reward_model(
            encoder_path(rm_base_spec), rm_base_spec, rm_spec, pairs, td.reward_model, seed=cfg.seed, log=td.log
        )
        td.mark_done("reward_model", h_rm, **{k: v for k, v in m.items() if not isinstance(v, dict)})
        td.update(metrics={"reward_model": m})
        acc = (
            "n/a (no held-out pairs)"
            if m["heldout_accuracy"] is None
            else f"{m['heldout_accuracy']:.3f} on {m['heldout_pairs']} held-out pairs (95% CI {m['heldout_ci95'][0]:.3f}-{m['heldout_ci95'][1]:.3f})"
        )
        say(f"stage1 reward model: {m['train_pairs']} train pairs, held-out accuracy {acc}, {m['seconds']} s")
    if data_only:
        return td.load()

    # 6. GRPO per persona, starting from pi_SFT
    h_policy = cfg.section_hash("stage1.grpo", "stage1.lora", "stage1.reward")
    scorer = None
    tok = None
    base_path = resolve_base(cfg.base_model)
    for card in cards:
        dest = td.adapter(card.id)
        h_ad = stable_hash([h_rm, h_policy, card.id, ctx_hash, sft_hash])
        if td.step_done(f"adapter:{card.id}", h_ad, dest / "adapter_config.json"):
            say(f"stage1 adapter {card.id}: done ({dest})")
            td.update(adapters={card.id: f"adapters/{card.id}"})
            continue
        if scorer is None:
            from .reward_model import RewardScorer

            scorer = RewardScorer(td.reward_model)
            tok = load_tokenizer(base_path, cfg.base_model)
        mine = [st for st in states if st.speaker == card.name]
        view = views[mine[0].task.name]
        others = [c.name for c in view.cards if c.name != card.name]
        baseline = None
        if s1.reward.rm_baseline == "sft_candidates":
            keys = {st.key for st in mine}
            baseline = StateBaseline.from_candidates(scorer, [c for c in candidates if c["state"] in keys])
        rows = [{"prompt": views[st.task.name].speaker_messages(st, card, st.directive), "state": st.key} for st in mine]
        dest.parent.mkdir(parents=True, exist_ok=True)
        res = run_grpo(
            name=card.id,
            stage="stage1",
            base_path=base_path,
            base_spec=cfg.base_model,
            tokenizer=tok,
            rows=rows,
            reward_fn=persona_reward_fn(scorer, card, others, cfg, view, baseline),
            spec=s1.grpo,
            lora=s1.lora,
            out_dir=dest,
            seed=cfg.seed,
            log=td.log,
            init_adapter=sft,
        )
        if is_main_process():
            td.mark_done(f"adapter:{card.id}", h_ad, **{k: v for k, v in res.items() if k != "final"})
            td.update(adapters={card.id: f"adapters/{card.id}"}, metrics={f"adapter:{card.id}": res})
        say(
            f"stage1 adapter {card.id}: {res['steps']} GRPO steps on {len(rows)} states in {res['seconds']} s, "
            f"trainable {res['trainable_pct']:.3f}% ({res['trainable_params']:,} of {res['total_params']:,})"
        )
    return td.load()
