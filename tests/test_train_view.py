"""Training sees what evaluation sees: the trainer's speaker and Director prompts are the messages the
evaluated system sends in a real dialogue, and directives are read by the evaluation parser."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.train_helpers import team_responder

REPO = Path(__file__).resolve().parent.parent
TINY_SYSTEM = str(REPO / "baselines" / "train" / "systems" / "mascot-tiny.yaml")


def _dialogue(system_ref: str, spec: str):
    from mascot_eval.data.loaders import load_contexts
    from mascot_eval.systems.engine import run_dialogue
    from mascot_eval.systems.user_sim import UserSimulator
    from mascot_eval.taskspec import load_task
    from mascot_eval.train.view import SystemView

    task = load_task("demo").model_copy(update={"rounds": 2})
    ctx = load_contexts(task, None)[0]
    view = SystemView.build(system_ref, task, model=spec)
    user = UserSimulator(task, spec, agents=view.system.agents)
    t = asyncio.run(run_dialogue(view.system, user, task, ctx, "INTJ", seed=3))
    return task, ctx, view, t


def test_speaker_and_director_prompts_are_the_evaluated_systems(fake_model, tmp_cache):
    from tests import fakes

    from mascot_eval.train.view import states_of

    for ref in ("mascot", TINY_SYSTEM):
        spec = fake_model("team", team_responder)
        task, ctx, view, t = _dialogue(ref, spec)
        calls = fakes.CALLS["team"]
        speaker_calls = [c.messages for c in calls if c.tag.startswith("system:") and not c.tag.endswith(":director")]
        director_calls = [c.messages for c in calls if c.tag.endswith(":director")]
        states = states_of(t, task, ctx)
        assert len(states) == len(t.agent_turns) >= 4  # two rounds: mid-dialogue states, not only the opener
        assert any(st.round == 2 and st.spoken for st in states)
        assert all(st.directive for st in states)  # directive-conditioned, as evaluation is
        rendered = [view.speaker_messages(st, view.by_name[st.speaker], st.directive) for st in states]
        assert rendered == speaker_calls, ref
        # the Director's first attempt at each decision (re-asks append to it)
        first_attempts = [m for m in director_calls if m[-1]["role"] == "user" and not m[-1]["content"].startswith("Invalid")]
        assert [view.director_messages(st) for st in states] == first_attempts[: len(states)], ref


def test_directives_are_read_by_the_evaluation_parser(fake_model, tmp_cache):
    """The evaluation Director reads the LAST JSON object (the old trainer read the first)."""
    from mascot_eval.train.view import states_of

    task, ctx, view, t = _dialogue(TINY_SYSTEM, fake_model("team", team_responder))
    st = states_of(t, task, ctx)[0]
    text = 'e.g. {"speaker": "Beacon", "action": "x", "tone": "y"} so: {"speaker": "Catalyst", "action": "ask", "tone": "calm"}'
    d, reason = view.parse_directive(text, st)
    assert reason is None and d.speaker == "Catalyst"
    st2 = states_of(t, task, ctx)[1]  # someone already spoke this round: repeating them is invalid
    d2, reason2 = view.parse_directive(f'{{"speaker": "{st2.spoken[0]}", "action": "a", "tone": "b"}}', st2)
    assert d2 is None and reason2 == "repeat_speaker"


def test_human_states_for_sft(data_dir):
    """SFT examples: the conversation up to a human supporter turn, the reply as the target."""
    from mascot_eval.data.loaders import load_contexts
    from mascot_eval.taskspec import load_task
    from mascot_eval.train.view import human_states

    task = load_task("ed-negative")
    ctx = load_contexts(task, data_dir)[0]
    pairs = human_states(ctx, task, 2, "mascot", ["Anchor", "Catalyst"])
    assert len(pairs) == 2
    (st1, r1), (st2, r2) = pairs
    listener = [h.text for h in ctx.turns if h.speaker == "listener"]
    assert r1 == " ".join(listener[0].split()) and r2 == " ".join(listener[1].split())
    assert [t.speaker for t in st1.turns] == ["user"] and st1.speaker == "Anchor"
    assert [t.speaker for t in st2.turns] == ["user", "Anchor", "user"] and st2.speaker == "Catalyst"
