"""Stage 2, Collaborative Dialogue Optimization: GRPO on the Director's LoRA adapter over N-turn blocks.

1. Rollouts (``stage2/rollouts.jsonl``): the evaluated system plays the training contexts with the
   Stage-1 speakers (base + their persona adapters) and its own Director (base model). Every agent turn
   of a rollout is a Director *state*: the conversation so far, who spoke this round, the plan.
2. GRPO: for each state the Director's prompt is rendered by the system's Director
   (:meth:`.view.SystemView.director_messages`). With ``decision: speaker`` (default) the prompt is
   prefilled up to the speaker slot of the JSON directive (``stage2.prefill``) and the completion is
   one token, sampled among the options' first tokens only (:func:`choice_bias`): the policy's
   probabilities renormalised over the speakers (and "none"), what the evaluation Director decides by
   constrained choice (a free sample of the 135M base names a speaker almost never); with
   ``decision: directive`` the whole JSON directive is generated and read by the evaluation parser.
   Each sampled decision is *played out*: the chosen speaker answers (its Stage-1 adapter, the system's
   speaker code), then the system continues the round with its own Director until ``block_turns`` agent
   turns or the round's end. The block is judged by the training judge's group rubric:

       reward = judge_weight * group_rubric(round up to the block end)   (criteria mean, 1-5 -> 0-1)
              + format_weight * format(decision)
              - eta * (speaker redundancy over the dialogue + content redundancy in the round)

   Scores are read like Stage 1's (:func:`.judging.criterion_value`: the expected digit for logprob and
   rules judges). An invalid decision gets format 0 (0.5 for JSON that is not a valid directive), no
   judge term and the largest penalty (2); it is never logged as judged. A block the judge leaves
   unscored gets the mean judge term of its scored siblings (same state), so it neither helps nor hurts;
   ``unscored_blocks`` counts them. ``group_judge`` is logged only over blocks that were judged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..backends.client import ClientSettings
from ..errors import UserError
from ..fileio import stable_hash
from ..personas import PersonaCard
from ..transcript import Transcript, Turn
from ..aio import run_sync
from .basemodel import load_tokenizer, resolve_base
from .config import TrainConfig, personas_of
from .diversity import block_redundancy
from .grpo import is_main_process, run_grpo
from .judging import criterion_value
from .rewards import completion_text, directive_format_reward
from .sample import rollout_states, run_rollouts
from .serving import role_spec
from .stage1 import Say, _quiet, _require_main, prepare, views_for
from .view import State, SystemView


def group_term(rows: list[dict[str, Any]], criteria: list[str], mode: str) -> float | None:
    """Mean of the chosen group criteria on 1-5 (read like Stage 1), scaled to 0-1; None when none was scored."""
    vals = [v for r in rows if r["criterion"] in criteria and (v := criterion_value(r, mode)) is not None]
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


def chosen_directive(card: PersonaCard):
    """The action and tone the played-out speaker follows when only the speaker slot is decided (the
    evaluation Director's documented default for a speaker: act in role, the card's first trait)."""
    from ..systems.director import Directive

    return Directive(speaker=card.name, action=f"respond to the user as the {card.role}", tone=card.traits[0])


def decide(view: SystemView, st: State, text: str, decision: str, prefill: str):
    """(Directive | None, reason | None, format reward) for one Director completion."""
    from ..systems.director import STOP, match_speaker
    from ..systems.mascot import Mascot

    if decision == "directive":
        d, reason = view.parse_directive(text, st)
        t = text.strip()
        return d, reason, directive_format_reward(reason, t.startswith("{") and t.endswith("}"))
    name = text.split('"', 1)[0].strip()
    system = view.system
    # the trainer's systems are kind 'mascot' (train config) and have a Director (director_messages)
    assert isinstance(system, Mascot) and system.director is not None
    director = system.director
    if name and match_speaker(name, view.cards) is None and name.lower() not in STOP:
        # a speaker slot cut after its first token(s): the one option it starts (first tokens are unique)
        starts = [o for o in [*(c.name for c in view.cards), "none"] if o.lower().startswith(name.lower())]
        if len(starts) == 1:
            name = starts[0]
    if name.lower() in STOP:
        if len(st.spoken) >= director.min_speakers:
            return None, None, 1.0
        return None, "ended_too_early", 0.0
    card = match_speaker(name, view.cards) if name else None
    if card is None:
        return None, "unknown_speaker", 0.0
    if card.name in st.spoken and not director.allow_repeat:
        return None, "repeat_speaker", 0.0
    return chosen_directive(card), None, 1.0


async def play_block(view: SystemView, st: State, first, n: int, seed: int, settings: ClientSettings) -> list[Turn]:
    """The chosen speaker answers, then the system's own Director continues the round, up to ``n`` agent turns."""
    from ..systems.mascot import Mascot
    from ..systems.speak import speak

    system = view.system
    # the trainer's systems are kind 'mascot' (train config) and have a Director (director_messages)
    assert isinstance(system, Mascot) and system.director is not None
    ds = view.dialogue_state(st, seed)
    ds.settings = settings
    spoken, plan = list(st.spoken), list(st.plan)
    out: list[Turn] = []
    d = first
    while d is not None and d.speaker is not None and len(out) < n:
        turn = await speak(system, ds, view.by_name[d.speaker], directive=d.to_dict(), meta={})
        ds.turns.append(turn)
        out.append(turn)
        spoken.append(d.speaker)
        plan.append(d.to_dict())
        if len(out) >= n or len(spoken) >= system.max_speakers:
            break
        d, _ = await system.director.next(ds, system.prompt_vars(ds), spoken, plan)
    return out


def block_transcript(st: State, view: SystemView, turns: list[Turn], tag: str) -> Transcript:
    t = st.task
    return Transcript(
        dialogue_id=f"train:{st.dialogue_id}:{tag}",
        task=t.name,
        task_version=t.version,
        split=t.split,
        domain=st.context.domain,
        context_id=st.context.id,
        system=view.system.config.name,
        system_config_hash="train",
        persona_group=view.system.group,
        agents=view.system.agents,
        turns=turns,
        user_profile=st.profile,
        context=st.context.to_dict(),
        personas={c.name: c.model_dump() for c in view.cards},
    )


def block_reward_parts(st: State, view: SystemView, block: list[Turn], n: int):
    """(the round's turns up to the block end, redundancy): speaker redundancy over every agent turn of the
    dialogue so far (repeating an agent while another has not been heard), content redundancy in the round."""
    names = view.system.agents
    round_turns = [t for t in st.turns if t.round == st.round] + block
    dialogue_agents = [(t.speaker, t.text) for t in [*st.turns, *block] if not t.is_user]
    round_agents = [(t.speaker, t.text) for t in round_turns if not t.is_user]
    sp = block_redundancy([(s, "") for s, _ in dialogue_agents], names, n).speaker
    content = block_redundancy(round_agents, names, n).content
    return round_turns, sp, content


def director_reward_fn(
    cfg: TrainConfig,
    views: dict[str, SystemView],
    states: dict[str, State],
    judge: Callable[[Transcript, SystemView], Any],
    mode: str,
    settings: ClientSettings,
):
    """trl reward function for Director completions (see the module docstring for the formula)."""
    r = cfg.stage2.reward
    s2 = cfg.stage2

    def director_reward(prompts, completions, state, log_metric=None, **kwargs):  # noqa: ARG001
        raws = [completion_text(c) for c in completions]
        decided = [decide(views[states[k].task.name], states[k], x, s2.decision, s2.prefill) for k, x in zip(state, raws)]

        async def one(i: int) -> tuple[float | None, float, float, bool]:
            d, reason, _fmt = decided[i]
            st = states[state[i]]
            view = views[st.task.name]
            if reason is not None:
                return None, 2.0, 1.0, False
            block = [] if d is None else await play_block(view, st, d, s2.block_turns, cfg.seed + i, settings)
            round_turns, sp, content = block_reward_parts(st, view, block, r.ngram)
            rows = await judge(block_transcript(st, view, round_turns, stable_hash([raws[i], st.key], 10)), view)
            return group_term(rows, r.criteria, mode), sp + content, sp, True

        async def all_():
            return await asyncio.gather(*(one(i) for i in range(len(raws))))

        results = run_sync(all_())
        raw_terms = [j for j, _, _, _ in results]
        valid = [ok for _, _, _, ok in results]
        terms = impute_unscored(raw_terms, list(state))
        out = []
        for i, (_, pen, _, ok) in enumerate(results):
            j = terms[i] if ok else None
            out.append(
                r.judge_weight * (j if j is not None else 0.0) + r.format_weight * decided[i][2] - r.diversity_weight * pen
            )
        if log_metric is not None:
            n_valid = sum(valid)
            log_metric("invalid_directive", 1 - n_valid / len(raws))
            judged = [j for j, ok in zip(raw_terms, valid) if ok and j is not None]
            log_metric("judged_blocks", float(len(judged)))
            log_metric("unscored_blocks", float(sum(1 for j, ok in zip(raw_terms, valid) if ok and j is None)))
            if n_valid:
                log_metric("redundancy", sum(p for (_, p, _, ok) in results if ok) / n_valid)
                log_metric("speaker_redundancy", sum(s for (_, _, s, ok) in results if ok) / n_valid)
            if judged:  # never a 0.0 for "nothing was judged"
                log_metric("group_judge", sum(judged) / len(judged))
        return out

    return director_reward


def director_prompt(view: SystemView, st: State, tok, decision: str, prefill: str) -> Any:
    """The Director's prompt as the system renders it; prefilled up to the speaker slot for ``decision: speaker``."""
    messages = view.director_messages(st)
    if decision == "directive":
        return messages
    from ..backends.local import chat_template_kwargs

    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **chat_template_kwargs(tok)) + prefill


def choice_bias(tok, cards: list[PersonaCard], prefill: str, bias: float = 100.0) -> list:
    """trl generation ``sequence_bias`` that restricts the sampled speaker slot to the options' first tokens:
    with +``bias`` on each, the sampled token follows the policy's own probabilities renormalised over the
    options (what choice-constrained decoding reads), so every sampled decision names an option."""
    head = tok.encode(prefill, add_special_tokens=False)
    firsts: dict[int, str] = {}
    for option in [*(c.name for c in cards), "none"]:
        ids = tok.encode(prefill + option, add_special_tokens=False)
        if ids[: len(head)] != head or len(ids) == len(head):
            raise UserError(
                f"stage2.prefill {prefill!r}: the tokenizer merges it with the option {option!r}; end the "
                "prefill on a token boundary (e.g. with a quote)"
            )
        first = ids[len(head)]
        if first in firsts:
            raise UserError(
                f"stage2.decision 'speaker': options {firsts[first]!r} and {option!r} start with the same "
                "token; use decision: directive"
            )
        firsts[first] = option
    return [[[t], bias] for t in firsts]


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
    td, contexts, ctx_hash = prepare(cfg, out, data_dir, say)
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
    speakers = {c.id: role_spec(cfg, c.id, td.adapter(c.id)) for c in cards}
    views = views_for(cfg, td, contexts, speakers)
    rollouts = td.rollouts

    # 1. rollouts with the Stage-1 speakers and the base Director (or the Stage-1 rollouts, stage2.rollouts: stage1)
    if cfg.stage2.rollouts == "stage1":
        rollouts = td.root / "stage1" / "rollouts.jsonl"
        h_roll = stable_hash([steps.get("rollouts", {}).get("inputs"), speaker_hash, "stage1-rollouts"])
        if not rollouts.is_file():
            raise UserError(f"{out}: stage2.rollouts is 'stage1' but {rollouts} is missing; run stage1 first")
        say(f"stage2 rollouts: the Stage-1 rollouts ({rollouts})")
    else:
        h_roll = stable_hash(
            [
                speaker_hash,
                ctx_hash,
                cfg.section_hash("seed", "sampling_model", "system", "stage1.rollouts"),
                {k: v.system.config_hash() for k, v in sorted(views.items())},
            ]
        )
        if td.step_done("rollouts2", h_roll, rollouts):
            say(f"stage2 rollouts: done ({rollouts})")
        else:
            _require_main("rollouts2")
            td.step_check("rollouts2", h_roll, rollouts)
            c = run_rollouts(cfg, contexts, views, role_spec(cfg, None, None), rollouts, settings=settings, seed=cfg.seed + 1)
            from ..fileio import read_jsonl

            rows = list(read_jsonl(rollouts))
            stats = director_stats(rows)
            td.mark_done("rollouts2", h_roll, dialogues=len(rows), **stats)
            td.update(metrics={"stage2_rollouts": {"dialogues": len(rows), **stats}})
            say(f"stage2 rollouts: {c['new']} dialogues, {c['reused']} reused; base Director: {stats}")
    states = rollout_states(rollouts, contexts, set(views[contexts[0].task.name].system.agents))
    if data_only:
        return td.load()

    # 2. GRPO on the Director
    dest = td.adapter("director")
    from ..judges.score import judge_transcript

    judge_spec = cfg.judge_spec()
    h_dir = stable_hash([h_roll, cfg.judge, cfg.judge_overrides.model_dump(exclude_none=True), cfg.section_hash("stage2")])
    if td.step_done("adapter:director", h_dir, dest / "adapter_config.json"):
        say(f"stage2 director adapter: done ({dest})")
        td.update(adapters={"director": "adapters/director"})
        return td.load()
    base_path = resolve_base(cfg.base_model)
    tok = load_tokenizer(base_path, cfg.base_model)
    s2 = cfg.stage2
    by_key = {st.key: st for st in states}
    rows = [{"prompt": director_prompt(views[st.task.name], st, tok, s2.decision, s2.prefill), "state": st.key} for st in states]
    spec, gen_kwargs = s2.grpo, None
    if s2.decision == "speaker":  # one token: the option's first, sampled among the options only
        gen_kwargs = {"sequence_bias": choice_bias(tok, views[states[0].task.name].cards, s2.prefill)}
        spec = spec.model_copy(update={"max_completion_length": 1})

    async def judge(t: Transcript, view: SystemView):
        return await judge_transcript(judge_spec, t, levels=("group",), settings=settings, cards=view.cards)

    dest.parent.mkdir(parents=True, exist_ok=True)
    res = run_grpo(
        name="director",
        stage="stage2",
        base_path=base_path,
        base_spec=cfg.base_model,
        tokenizer=tok,
        rows=rows,
        reward_fn=director_reward_fn(cfg, views, by_key, judge, judge_spec.mode, settings),
        spec=spec,
        lora=s2.lora,
        out_dir=dest,
        seed=cfg.seed,
        log=td.log,
        generation_kwargs=gen_kwargs,
    )
    if is_main_process():
        td.mark_done("adapter:director", h_dir, **{k: v for k, v in res.items() if k != "final"})
        td.update(adapters={"director": "adapters/director"}, metrics={"adapter:director": res})
    say(
        f"stage2 director adapter: {res['steps']} GRPO steps on {len(rows)} states in {res['seconds']} s, "
        f"trainable {res['trainable_pct']:.3f}%"
    )
    return td.load()


def director_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Summed Director counters of rollout transcripts (decisions, valid first, fallbacks, ...)."""
    out: dict[str, Any] = {}
    for r in rows:
        for k, v in ((r.get("stats") or {}).get("director") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    return out
