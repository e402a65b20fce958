"""Stage 2 rewards with scripted models: decisions are read like the evaluation Director reads them, a
valid decision is played out as an N-turn block by the system's own code and judged, invalid ones are
penalised and never logged as judged, and the redundancy term counts repeated speakers across rounds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.train_helpers import config_data, team_responder, write_config

REPO = Path(__file__).resolve().parent.parent
TINY_SYSTEM = str(REPO / "baselines" / "train" / "systems" / "mascot-tiny.yaml")


def _setup(tmp_path, fake_model):
    from mascot_eval.data.loaders import load_contexts
    from mascot_eval.systems.engine import run_dialogue
    from mascot_eval.systems.user_sim import UserSimulator
    from mascot_eval.taskspec import load_task
    from mascot_eval.train.config import load_config
    from mascot_eval.train.view import SystemView, states_of

    spec = fake_model("team", team_responder)
    cfg = load_config(write_config(tmp_path, config_data(fake_model)))
    task = load_task("demo").model_copy(update={"rounds": 2})
    ctx = load_contexts(task, None)[0]
    view = SystemView.build(TINY_SYSTEM, task, model=spec)
    t = asyncio.run(run_dialogue(view.system, UserSimulator(task, spec, agents=view.system.agents), task, ctx, None, seed=1))
    states = states_of(t, task, ctx)
    return cfg, view, states


def _judge_rows(value):
    async def judge(t, view):
        return [
            {"criterion": c, "score": value, "weighted_score": float(value), "status": "scored"}
            for c in ("fidelity", "originality", "relevance", "engagement")
        ]

    return judge


def test_decide_reads_the_speaker_slot(tmp_path, fake_model, tmp_cache):
    from mascot_eval.train.stage2 import decide

    cfg, view, states = _setup(tmp_path, fake_model)
    first, second = states[0], states[1]
    d, reason, fmt = decide(view, first, 'Catalyst", "action": "ask"', "speaker", '{"speaker": "')
    assert reason is None and d.speaker == "Catalyst" and fmt == 1.0 and d.action and d.tone
    assert decide(view, first, "Zed", "speaker", "")[1] == "unknown_speaker"
    assert decide(view, second, f'{second.spoken[0]}"', "speaker", "")[1] == "repeat_speaker"
    # min_speakers is 2 in mascot-tiny: ending after one speaker is too early
    assert decide(view, second, 'none"', "speaker", "")[1] == "ended_too_early"
    d, reason, fmt = decide(view, first, '{"speaker": "Beacon", "action": "praise", "tone": "bright"}', "directive", "")
    assert d.speaker == "Beacon" and fmt == 1.0
    assert decide(view, first, "Cat", "speaker", "")[0].speaker == "Catalyst"  # one sampled token: its option


def test_choice_bias_restricts_sampling_to_the_options():
    from transformers import AutoTokenizer

    from mascot_eval.backends.modeldir import embedded_model_dir
    from mascot_eval.personas import get_group
    from mascot_eval.train.stage2 import choice_bias

    tok = AutoTokenizer.from_pretrained(str(embedded_model_dir()))
    _, cards = get_group("emotional")
    bias = choice_bias(tok, cards, '{"speaker": "')
    assert [tok.decode(t) for (t, b) in bias] == ["An", "Cat", "Be", "none"] and all(b == 100.0 for _, b in bias)


def test_invalid_decisions_are_penalised_and_not_logged_as_judged(tmp_path, fake_model, tmp_cache):
    """group_judge was logged as 0.0 when every directive was invalid (nothing was judged)."""
    from mascot_eval.backends.client import ClientSettings
    from mascot_eval.train.stage2 import director_reward_fn

    cfg, view, states = _setup(tmp_path, fake_model)
    st = states[0]
    fn = director_reward_fn(cfg, {st.task.name: view}, {st.key: st}, _judge_rows(5), "rules", ClientSettings())
    logged: dict[str, float] = {}
    out = fn(prompts=["p"] * 2, completions=["Zed", "???"], state=[st.key] * 2, log_metric=logged.__setitem__)
    r = cfg.stage2.reward
    assert out == [pytest.approx(-r.diversity_weight * 2.0)] * 2
    assert logged["invalid_directive"] == 1.0 and logged["judged_blocks"] == 0.0
    assert "group_judge" not in logged  # never a 0.0 for "nothing was judged"

    logged.clear()
    out = fn(prompts=["p"] * 2, completions=['Catalyst"', "Zed"], state=[st.key] * 2, log_metric=logged.__setitem__)
    assert logged["group_judge"] == pytest.approx(1.0) and logged["judged_blocks"] == 1.0
    assert logged["invalid_directive"] == 0.5
    assert out[0] > out[1]


def test_block_is_played_out_by_the_system_and_repeats_across_rounds_count(tmp_path, fake_model, tmp_cache):
    from tests import fakes

    from mascot_eval.backends.client import ClientSettings
    from mascot_eval.train.stage2 import block_reward_parts, chosen_directive, play_block

    cfg, view, states = _setup(tmp_path, fake_model)
    first = states[0]
    n_before = len(fakes.CALLS["team"])
    block = asyncio.run(play_block(view, first, chosen_directive(view.by_name["Beacon"]), 2, 0, ClientSettings()))
    assert [t.speaker for t in block][0] == "Beacon" and len(block) == 2  # the round continues with the Director
    assert block[1].speaker != "Beacon" and block[0].directive["speaker"] == "Beacon"
    assert len(fakes.CALLS["team"]) > n_before
    # round 2: the round-1 speakers were A and B; picking one of them again while C has not been heard is a repeat
    r2 = next(st for st in states if st.round == 2 and not st.spoken)
    heard = [t.speaker for t in r2.turns if not t.is_user]
    unheard = next(n for n in view.system.agents if n not in heard)
    from mascot_eval.transcript import Turn

    _, sp_repeat, _ = block_reward_parts(r2, view, [Turn(round=2, speaker=heard[0], text="x y z")], 2)
    _, sp_new, _ = block_reward_parts(r2, view, [Turn(round=2, speaker=unheard, text="x y z")], 2)
    assert sp_repeat > 0 and sp_new == 0.0


def test_director_stats_are_summed(tmp_path):
    from mascot_eval.train.stage2 import director_stats

    rows = [
        {"stats": {"director": {"decisions": 2, "fallbacks": 1, "invalid_reasons": {"no_json": 1}}}},
        {"stats": {"director": {"decisions": 3, "fallbacks": 0}}},
    ]
    assert director_stats(rows) == {"decisions": 5, "fallbacks": 1}
    json.dumps(director_stats(rows))
