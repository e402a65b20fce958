"""Conversation engine and each system's flow on the scripted fake backend."""

from __future__ import annotations

import json
import re

import jsonschema

from mascot_eval.data.context import Context, HumanTurn
from mascot_eval.runs.rundir import RunDir
from mascot_eval.systems.generate import generate
from mascot_eval.taskspec import load_task
from mascot_eval.transcript import JSON_SCHEMA, Transcript

AGENTS = ["Anchor", "Catalyst", "Beacon"]


def emo_context(i: int = 0) -> Context:
    return Context(
        id=f"c{i}",
        source="demo",
        domain="emotional",
        situation=f"My dog got sick ({i}).",
        emotion="sad",
        valence="negative",
        turns=[HumanTurn("user", f"My dog is sick and I feel awful ({i}).")],
    )


def work_context() -> Context:
    return Context(
        id="w0",
        source="demo",
        domain="workplace",
        situation="Budget review meeting",
        query="What did the team decide about the budget?",
        participants=["PM", "Lead"],
        turns=[HumanTurn("PM", "We need to cut ten percent."), HumanTurn("Lead", "Not from testing.")],
    )


def speaker_of(req) -> str:
    m = re.search(r"You are (\w+)", req.messages[0]["content"])
    return m.group(1) if m else "?"


def responder(director=None, user=None, agent=None):
    def r(req):
        if req.tag == "user-sim":
            return user(req) if user else "I still feel bad about it."
        if req.tag.endswith(":director"):
            return director(req) if director else '{"speaker": "none"}'
        return agent(req) if agent else f"{speaker_of(req)} says hello."

    return r


def run(tmp_path, fake_model, systems, resp, *, pairs=None, rounds=2, name="t", seed=0, **kw):
    task = load_task("demo").model_copy(update={"rounds": rounds})
    spec = fake_model(name, resp)
    rd = RunDir(tmp_path / f"run-{name}", create=True)
    pairs = pairs or [(emo_context(), "INTJ")]
    res = generate(rd, [task], systems, model=spec, progress=False, seed=seed, pairs={"demo": pairs}, **kw)
    return res, {t.system: t for t in rd.transcripts()}, rd


def check_schema(t: Transcript) -> None:
    jsonschema.validate(json.loads(json.dumps(t.to_dict())), JSON_SCHEMA)
    assert Transcript.from_dict(t.to_dict()).to_dict() == t.to_dict()


def test_director_picks_speakers_and_ends_rounds(tmp_path, fake_model, tmp_cache):
    def director(req):
        text = req.messages[-1]["content"]
        if "Already spoke this round" in text:
            return 'ok {"speaker": "none", "action": "", "tone": ""}'
        return '{"speaker": "beacon", "action": "celebrate effort", "tone": "bright"}'

    res, ts, _ = run(tmp_path, fake_model, ["mascot"], responder(director=director))
    t = ts["mascot"]
    check_schema(t)
    assert res.new == 1 and res.failed == 0
    agent_turns = t.agent_turns
    assert [x.speaker for x in agent_turns] == ["Beacon", "Beacon"]  # one speaker per round, chosen by the Director
    assert agent_turns[0].directive == {"speaker": "Beacon", "action": "celebrate effort", "tone": "bright", "source": "parsed"}
    st = t.stats["director"]
    assert st["decisions"] == 4 and st["valid_first"] == 4 and st["fallbacks"] == 0 and st["round_ends"] == 2
    assert st["speakers_per_round"] == [1, 1]
    assert t.turns[0].meta["source"] == "context" and t.turns[0].text.startswith("My dog is sick")


def test_invalid_directive_is_reasked_once_then_valid(tmp_path, fake_model, tmp_cache):
    def director(req):
        if req.messages[-1]["role"] == "user" and req.messages[-1]["content"].startswith("Invalid:"):
            return '{"speaker": "Catalyst", "action": "ask", "tone": "curious"}'
        if "Already spoke this round" in req.messages[-1]["content"]:
            return '{"speaker": "none"}'
        return "Catalyst should go next"  # no JSON

    _, ts, _ = run(tmp_path, fake_model, ["mascot"], responder(director=director), rounds=1)
    t = ts["mascot"]
    st = t.stats["director"]
    assert st["reasked"] == 1 and st["valid_after_reask"] == 1 and st["fallbacks"] == 0
    assert st["invalid_reasons"] == {"no_json": 1}
    turn = t.agent_turns[0]
    assert turn.speaker == "Catalyst" and turn.meta["director"]["attempts"][0]["invalid"] == "no_json"
    assert t.stats["usage"]["director"]["calls"] == 3  # 2 for the first decision, 1 to end the round


def test_fallback_after_second_invalid_is_counted(tmp_path, fake_model, tmp_cache):
    _, ts, _ = run(tmp_path, fake_model, ["mascot"], responder(director=lambda req: '{"speaker": "Zed"}'), rounds=2)
    t = ts["mascot"]
    check_schema(t)
    st = t.stats["director"]
    # every decision fails twice; fallback walks the group order, then ends the round
    assert [x.speaker for x in t.agent_turns] == AGENTS * 2
    assert st["decisions"] == 6 and st["reasked"] == 6 and st["fallbacks"] == 6
    assert st["invalid_reasons"] == {"unknown_speaker": 12}
    assert all(x.meta["director"]["fallback"] for x in t.agent_turns)
    assert t.agent_turns[1].directive == {
        "speaker": "Catalyst",
        "action": "respond to the user as the critical thinker",
        "tone": t.personas["Catalyst"].traits[0],
        "source": "fallback",
    }
    assert st["sources"] == {"constrained": 0, "parsed": 0, "reasked": 0, "fallback": 6} and st["mode"] == "text"


def test_user_can_end_the_conversation(tmp_path, fake_model, tmp_cache):
    def user(req):
        return "Thanks, that helped a lot. [END]"

    _, ts, _ = run(tmp_path, fake_model, ["zero-shot"], responder(user=user), rounds=4)
    t = ts["zero-shot"]
    check_schema(t)
    assert t.ended_by == "user"
    assert t.turns[-1].speaker == "user" and t.turns[-1].text == "Thanks, that helped a lot."
    assert t.turns[-1].meta["ended"] is True and t.turns[-1].round == 2
    assert len(t.rounds()) == 2


def test_workplace_context_user_opens_with_llm(tmp_path, fake_model, tmp_cache):
    seen = []

    def user(req):
        seen.append(req.messages[-1]["content"])
        return "User: Can you remind me what we decided on the budget?"

    _, ts, _ = run(tmp_path, fake_model, ["zero-shot"], responder(user=user), pairs=[(work_context(), None)], rounds=1)
    t = ts["zero-shot"]
    assert t.turns[0].text == "Can you remind me what we decided on the budget?"
    assert "What you want to know: What did the team decide about the budget?" in seen[0]


def test_prompted_flows(tmp_path, fake_model, tmp_cache):
    prompts: dict[str, list[str]] = {}

    def agent(req):
        prompts.setdefault(req.tag, []).append("\n".join(m["content"] for m in req.messages))
        if "Thoughts:" in req.messages[-1]["content"]:
            return f"Thoughts: they are sad.\nReply: {speaker_of(req)} is with you."
        return f"{speaker_of(req)}: {speaker_of(req)} is with you."

    names = ["zero-shot", "zero-shot-cot", "few-shot", "few-shot-cot", "single-agent", "mascot-c", "mascot-p"]
    res, ts, _ = run(tmp_path, fake_model, names, responder(agent=agent, director=lambda r: '{"speaker":"none"}'))
    assert res.new == len(names)
    for name in names:
        check_schema(ts[name])
    zs = ts["zero-shot"]
    assert [x.speaker for x in zs.agent_turns] == AGENTS * 2
    assert zs.agent_turns[0].text == "Anchor is with you." and zs.agent_turns[0].meta["raw"].startswith("Anchor:")
    cot = ts["zero-shot-cot"].agent_turns[0]
    assert cot.text == "Anchor is with you." and cot.meta["reasoning"] == "Thoughts: they are sad."
    assert "Examples of good replies" in prompts["system:few-shot"][0]
    assert "Examples of good replies" not in prompts["system:zero-shot"][0]
    single = ts["single-agent"]
    assert single.agents == ["Assistant"] and [x.speaker for x in single.agent_turns] == ["Assistant", "Assistant"]
    # mascot-c: the Director is kept ("none" twice before anyone spoke -> fallback, then "none" ends
    # the round), but the speaker is the first of the round's seeded random order
    mc = ts["mascot-c"]
    assert all(x.directive and x.speaker == x.meta["order"][0] for x in mc.agent_turns)
    assert mc.stats["director"]["fallbacks"] == 2
    # mascot-p: speakers get the plain prompt without the persona card's traits
    mp = ts["mascot-p"]
    assert "Traits:" not in prompts["system:mascot-p"][0] and "Traits:" in prompts["system:mascot-c"][0]
    # "none" before anyone spoke is invalid twice -> fallback to the first agent, then "none" ends the round
    assert mp.stats["director"]["fallbacks"] == 2 and mp.stats["director"]["invalid_reasons"] == {"ended_too_early": 4}
    assert [x.speaker for x in mp.agent_turns] == ["Anchor", "Anchor"]


def test_mascot_c_order_is_random_but_seeded(tmp_path, fake_model, tmp_cache):
    pairs = [(emo_context(i), None) for i in range(6)]
    _, _, rd = run(tmp_path, fake_model, ["mascot-c"], responder(), pairs=pairs, rounds=2, name="a")
    orders = {tuple(x.speaker for x in t.agent_turns) for t in rd.transcripts()}
    assert len(orders) > 1  # not a fixed order
    _, _, rd2 = run(tmp_path, fake_model, ["mascot-c"], responder(), pairs=pairs, rounds=2, name="b")
    assert {t.dialogue_id: [x.speaker for x in t.turns] for t in rd.transcripts()} == {
        t.dialogue_id: [x.speaker for x in t.turns] for t in rd2.transcripts()
    }


def test_self_consistency_keeps_the_most_consistent_sample(tmp_path, fake_model, tmp_cache):
    texts = [
        "talk with your vet about it today",
        "talk to the vet about it today",
        "I like turtles",
        "maybe talk with the vet today",
        "the weather is nice",
    ]

    def agent(req):
        return texts[req.params.sample_index]

    _, ts, _ = run(tmp_path, fake_model, ["self-consistency"], responder(agent=agent), rounds=1)
    t = ts["self-consistency"]
    check_schema(t)
    from tests import fakes

    sc_calls = [r for r in fakes.CALLS["t"] if r.tag == "system:self-consistency"]
    assert len(sc_calls) == 5 * 3 and sorted({r.params.sample_index for r in sc_calls}) == [0, 1, 2, 3, 4]
    assert len({r.params.seed for r in sc_calls}) == 15  # every sample has its own seed
    turn = t.agent_turns[0]
    assert turn.meta["candidates"] == texts and turn.text in texts[:2] + texts[3:4]
    assert turn.meta["chosen"] == texts.index(turn.text) and turn.usage.calls == 5


def test_multiagentesc_flow(tmp_path, fake_model, tmp_cache):
    def agent(req):
        last = req.messages[-1]["content"]
        if "In 2 short sentences" in last:
            return "The user is sad because the dog is sick."
        if "Which 2 strategies" in last:
            return "Affirmation and Reassurance, Question"
        if "Answer with its number only" in last:
            return "2"
        m = re.search(r'strategy "([^"]+)"', last)
        return f"{speaker_of(req)} reply using {m.group(1)}"

    _, ts, _ = run(tmp_path, fake_model, ["multiagentesc"], responder(agent=agent), rounds=1)
    t = ts["multiagentesc"]
    check_schema(t)
    turns = t.agent_turns
    assert [x.speaker for x in turns] == AGENTS
    m = turns[0].meta
    assert m["strategies"] == ["Affirmation and Reassurance", "Question"]
    assert m["votes"] == {"Catalyst": 2, "Beacon": 2} and m["chosen"] == 1
    assert turns[0].text == "Anchor reply using Question"
    assert m["analysis"] == "The user is sad because the dog is sick."
    st = t.stats["multiagentesc"]
    assert {k: st[k] for k in ("strategy_fallbacks", "invalid_votes", "selection_fallbacks")} == {
        "strategy_fallbacks": 0,
        "invalid_votes": 0,
        "selection_fallbacks": 0,
    }
    assert st["strategy_sources"]["parsed"] == 3 and st["vote_sources"]["parsed"] == 6 and st["mode"] == "text"
    assert m["strategy_source"] == "parsed" and m["vote_sources"] == {"Catalyst": "parsed", "Beacon": "parsed"}


def test_multiagentesc_counts_bad_votes_and_strategies(tmp_path, fake_model, tmp_cache):
    _, ts, _ = run(tmp_path, fake_model, ["multiagentesc"], responder(agent=lambda r: "hmm"), rounds=1)
    st = ts["multiagentesc"].stats["multiagentesc"]
    assert {k: st[k] for k in ("strategy_fallbacks", "invalid_votes", "selection_fallbacks")} == {
        "strategy_fallbacks": 3,
        "invalid_votes": 6,
        "selection_fallbacks": 3,
    }
    # text mode: each bad answer was re-asked once before falling back
    assert st["strategy_sources"]["fallback"] == 3 and st["vote_sources"]["fallback"] == 6
    assert ts["multiagentesc"].agent_turns[0].meta["chosen"] == 0


def test_an_agent_reply_that_cleans_to_nothing_is_resampled_once(tmp_path, fake_model, tmp_cache):
    # the first sample writes only the user's next line; the second (sample_index 1) is a real reply
    agent = lambda req: "User: so what now?" if req.params.sample_index == 0 else f"{speaker_of(req)} is here for you."
    res, ts, _ = run(tmp_path, fake_model, ["zero-shot"], responder(agent=agent), rounds=1, name="resample")
    t = ts["zero-shot"]
    turns = [x for x in t.turns if not x.is_user]
    assert turns and all(x.text.endswith("is here for you.") and x.meta["resampled"] for x in turns)
    assert all(x.meta["raw_first"] == "User: so what now?" for x in turns)
    assert t.stats["agents"]["resampled_empty"] == len(turns) and t.stats["agents"]["empty_turns"] == 0
    check_schema(t)


def test_an_agent_reply_empty_twice_stays_empty_and_is_counted(tmp_path, fake_model, tmp_cache):
    res, ts, _ = run(tmp_path, fake_model, ["zero-shot"], responder(agent=lambda req: "User: hm?"), rounds=1, name="empty2")
    t = ts["zero-shot"]
    turns = [x for x in t.turns if not x.is_user]
    assert all(x.text == "" and x.meta["empty"] for x in turns)
    assert t.stats["agents"]["empty_turns"] == len(turns) == t.stats["agents"]["resampled_empty"]
