"""Decisions valid by construction (choice scoring, JSON schema), visible fallbacks, honest ablations.

Scripted backends: `fake/` generates text only (parse + re-ask + fallback), `fakeprobs/` also
scores choices like the local engine, and `fakeschema/` (below) constrains to a JSON schema.
"""

from __future__ import annotations

import json
import re

import pytest

from mascot_eval.backends.base import BACKENDS, ChatRequest, ChatResponse
from mascot_eval.data.context import Context, HumanTurn
from mascot_eval.errors import UserError
from mascot_eval.runs.rundir import RunDir
from mascot_eval.stats.decisions import decision_stats, fallback_warnings
from mascot_eval.systems.engine import new_state
from mascot_eval.systems.factory import build_system
from mascot_eval.systems.generate import generate
from mascot_eval.taskspec import load_task
from tests import fakes

AGENTS = ["Anchor", "Catalyst", "Beacon"]
OPTION = re.compile(r"^(\d)\. (.+)$", re.MULTILINE)


class FakeSchemaBackend(fakes.FakeBackend):
    """`fakeschema/<name>`: a backend that constrains to GenerationParams.json_schema (records it)."""

    kind = "fakeschema"
    supports_json_schema = True
    SCHEMAS: list[dict] = []

    async def generate(self, request: ChatRequest) -> ChatResponse:
        if request.params.json_schema is not None:
            FakeSchemaBackend.SCHEMAS.append(request.params.json_schema)
        return await super().generate(request)


if "fakeschema" not in BACKENDS:
    BACKENDS.add("fakeschema", FakeSchemaBackend)


def emo_context(i: int = 0) -> Context:
    return Context(
        id=f"c{i}",
        source="demo",
        domain="emotional",
        situation=f"My exam went badly ({i}).",
        emotion="sad",
        valence="negative",
        turns=[HumanTurn("user", f"I failed my exam ({i}).")],
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


def text_responder(director=None, agent=None):
    def r(req):
        if req.tag == "user-sim":
            return "I still feel bad about it."
        if req.tag.endswith(":director"):
            return director(req) if director else '{"speaker": "none"}'
        return agent(req) if agent else f"{speaker_of(req)} says hello."

    return r


def options_of(req) -> list[str]:
    return [m.group(2) for m in OPTION.finditer(req.messages[-1]["content"])]


def prefer(words: list[str] | dict[str, float], position_bias: float = 3.0, prior: str = "Anchor", prior_weight: float = 1.0):
    """Choice probabilities: 1 + a bonus (2, or words[w]) for an option naming one of ``words`` when
    the prompt has a dialogue (not the content-free "N/A" one), + ``position_bias`` for label 1,
    + ``prior_weight`` for an option naming ``prior`` (a preference whatever the dialogue)."""
    bonus = words if isinstance(words, dict) else {w: 2.0 for w in words}

    def probs(req):
        opts = options_of(req)
        assert [str(i + 1) for i in range(len(opts))] == list(req.params.choices)
        assert req.params.seed is None  # choice scoring is deterministic: no seed in the cache key
        content = "N/A" not in req.messages[-1]["content"]
        w = [
            1.0
            + (max([b for x, b in bonus.items() if x in o], default=0.0) if content else 0.0)
            + (position_bias if i == 0 else 0.0)
            + (prior_weight if prior and prior in o else 0.0)
            for i, o in enumerate(opts)
        ]
        return [{str(i + 1): v / sum(w) for i, v in enumerate(w)}]

    return probs


def run(tmp_path, systems, spec, *, pairs=None, rounds=2, name="t", seed=0, **kw):
    task = load_task("demo").model_copy(update={"rounds": rounds})
    rd = RunDir(tmp_path / f"run-{name}", create=True)
    res = generate(
        rd, [task], systems, model=spec, progress=False, seed=seed, pairs={"demo": pairs or [(emo_context(), "INTJ")]}, **kw
    )
    return res, {t.system: t for t in rd.transcripts()}, rd


def system_yaml(tmp_path, name: str, base: str = "mascot", **options) -> str:
    import yaml

    from mascot_eval.systems.config import load_system_config

    cfg = load_system_config(base).model_dump(mode="json", exclude_none=True)
    cfg["name"] = name
    cfg["options"] = {**cfg.get("options", {}), **options}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return str(p)


# -- the Director -------------------------------------------------------------------------------


def test_director_choices_are_valid_by_construction_and_position_debiased(tmp_path, fake_model, tmp_cache):
    fake_model("ch", text_responder())
    spec = fakes.script_probs("ch", prefer(["Beacon", "nobody", "concrete next step", "encouraging"]))
    _, ts, _ = run(tmp_path, ["mascot"], spec)
    t = ts["mascot"]
    st = t.stats["director"]
    # Beacon wins every rotation-averaged choice although label 1 (Anchor first) is favoured by position;
    # once Beacon spoke, "nobody" (preferred) ends the round
    assert [x.speaker for x in t.agent_turns] == ["Beacon", "Beacon"]
    d = t.agent_turns[0].directive
    assert d == {
        "speaker": "Beacon",
        "action": "suggest one small, concrete next step",
        "tone": "encouraging",
        "source": "constrained",
    }
    assert st["mode"] == "choices" and st["decisions"] == 4 and st["valid_first"] == 4 and st["fallbacks"] == 0
    assert st["sources"] == {"constrained": 4, "parsed": 0, "reasked": 0, "fallback": 0}
    assert st["round_ends"] == 2 and st["round_end_sources"]["constrained"] == 2 and st["invalid_reasons"] == {}
    meta = t.agent_turns[0].meta["director"]
    assert meta["source"] == "constrained" and meta["probs"]["speaker"]["Beacon (growth advocate)"] > 0.3
    # every option shown in every position, for this dialogue and for the content-free one:
    # 3 speakers -> 2 x 3 calls, 8 actions -> 2 x 8, 6 tones -> 2 x 6
    calls = [r for r in fakes.CALLS["ch"] if r.params.choices]
    first = [r for r in calls if r.tag.endswith(":director")][:34]
    assert sorted(len(r.params.choices) for r in first) == [3] * 6 + [6] * 12 + [8] * 16  # nobody spoke: no ending yet
    assert t.agent_turns[0].meta["director"]["usage"]["calls"] == 34
    assert meta["prior"]["speaker"]["Anchor (emotional validator)"] > meta["prior"]["speaker"]["Beacon (growth advocate)"]
    # the speaker prompt carries the chosen action and tone
    agent_prompts = [r for r in fakes.CALLS["ch"] if r.tag == "system:mascot" and not r.params.choices]
    assert "suggest one small, concrete next step (tone: encouraging)" in agent_prompts[0].messages[-1]["content"]
    stats = decision_stats([t])["mascot"]["director"]
    assert stats["valid_share"] == 1.0 and stats["rounds_not_round_robin"] == 2 and stats["first_speakers"] == {"Beacon": 2}
    assert fallback_warnings(decision_stats([t])) == []


def test_without_rotation_the_position_preference_decides(tmp_path, fake_model, tmp_cache):
    fake_model("nr", text_responder())
    spec = fakes.script_probs("nr", prefer(["Beacon"]))
    _, ts, _ = run(tmp_path, [system_yaml(tmp_path, "no-rotate", debias="none", calibrate=False)], spec, rounds=1)
    t = ts["no-rotate"]
    assert t.agent_turns[0].speaker == "Anchor"  # label 1 wins when shown in one order only
    assert all(len(r.params.choices) for r in fakes.CALLS["nr"] if r.tag.endswith(":director"))
    assert t.agent_turns[0].meta["director"]["usage"]["calls"] == 3  # speaker, action, tone: one call each


def test_calibration_removes_what_the_model_prefers_for_any_dialogue(tmp_path, fake_model, tmp_cache):
    # no position bias, a strong prior for Anchor whatever the dialogue, a weaker preference for Beacon here
    fake_model("cal", text_responder())
    spec = fakes.script_probs("cal", prefer({"Beacon": 1.5}, position_bias=0.0, prior="Anchor", prior_weight=2.0))
    _, ts, _ = run(tmp_path, [system_yaml(tmp_path, "uncal", calibrate=False)], spec, rounds=1, name="u")
    assert ts["uncal"].agent_turns[0].speaker == "Anchor"  # weights Anchor 3, Catalyst 1, Beacon 2.5
    _, ts, _ = run(tmp_path, ["mascot"], spec, rounds=1, name="c")
    t = ts["mascot"]
    assert t.agent_turns[0].speaker == "Beacon"
    pr = t.agent_turns[0].meta["director"]["prior"]["speaker"]  # content-free: Anchor 3, Catalyst 1, Beacon 1
    assert pr["Anchor (emotional validator)"] == pytest.approx(0.6) and pr["Beacon (growth advocate)"] == pytest.approx(0.2)
    # calibrated: 3/3, 1/1, 2.5/1 -> Beacon 2.5 / 4.5
    assert t.agent_turns[0].meta["director"]["probs"]["speaker"]["Beacon (growth advocate)"] == pytest.approx(2.5 / 4.5, abs=1e-3)


def test_choice_calls_are_cached_and_counted(tmp_path, fake_model, tmp_cache):
    fake_model("cc", text_responder())
    spec = fakes.script_probs("cc", prefer(["Catalyst"]))
    _, ts, _ = run(tmp_path, ["mascot"], spec, rounds=1, name="a")
    n = len(fakes.CALLS["cc"])
    assert ts["mascot"].stats["usage"]["director"]["calls"] > 0
    _, ts2, _ = run(tmp_path, ["mascot"], spec, rounds=1, name="b")
    assert len(fakes.CALLS["cc"]) == n  # a rerun is answered from the response cache
    assert ts2["mascot"].turns[1].directive == ts["mascot"].turns[1].directive
    assert ts2["mascot"].stats["usage"]["director"]["cached"] == ts2["mascot"].stats["usage"]["director"]["calls"]


def test_schema_mode_sends_the_speaker_enum(tmp_path, fake_model, tmp_cache):
    def director(req):
        if "Already spoke this round" in req.messages[-1]["content"]:
            return '{"speaker": "none", "action": "", "tone": ""}'
        return '{"speaker": "Catalyst", "action": "ask what felt hardest", "tone": "curious"}'

    fake_model("sc", text_responder(director=director))
    FakeSchemaBackend.SCHEMAS.clear()
    _, ts, _ = run(tmp_path, ["mascot"], "fakeschema/sc", rounds=1)
    t = ts["mascot"]
    assert t.stats["director"]["mode"] == "schema"
    assert t.agent_turns[0].directive["source"] == "constrained" and t.agent_turns[0].speaker == "Catalyst"
    first, second = FakeSchemaBackend.SCHEMAS[:2]
    assert first["properties"]["speaker"]["enum"] == AGENTS  # nobody spoke yet: ending is not an option
    assert second["properties"]["speaker"]["enum"] == ["Anchor", "Beacon", "none"]


def test_a_mode_the_backend_cannot_serve_is_one_line(tmp_path, fake_model, tmp_cache):
    spec = fake_model("nochoice", text_responder())
    with pytest.raises(UserError, match=r"field 'options.decision' is choices, but model 'fake/nochoice' cannot score"):
        run(tmp_path, [system_yaml(tmp_path, "forced", decision="choices")], spec, rounds=1)
    with pytest.raises(UserError, match=r"field 'options.decision' is schema"):
        run(tmp_path, [system_yaml(tmp_path, "forced2", decision="schema")], spec, rounds=1, name="b")


def test_a_text_only_backend_goes_through_parse_reask_and_fallback_all_marked(tmp_path, fake_model, tmp_cache):
    def director(req):
        last = req.messages[-1]["content"]
        round1 = "round 1 reply" not in "\n".join(m["content"] for m in req.messages)
        if last.startswith("Invalid:"):
            return '{"speaker": "Beacon", "action": "cheer", "tone": "bright"}' if round1 else "still no idea"
        if "Already spoke this round" in last:
            return '{"speaker": "none"}'
        return "Beacon I guess" if round1 else '{"speaker": "Zed", "action": "x", "tone": "y"}'

    agent = lambda req: f"{speaker_of(req)}: round 1 reply."  # noqa: E731
    spec = fake_model("tx", text_responder(director=director, agent=agent))
    _, ts, _ = run(tmp_path, ["mascot"], spec, rounds=2)
    t = ts["mascot"]
    st = t.stats["director"]
    assert st["mode"] == "text"
    r1, r2 = [x for x in t.agent_turns if x.round == 1], [x for x in t.agent_turns if x.round == 2]
    assert [x.directive["source"] for x in r1] == ["reasked"]
    assert [x.directive["source"] for x in r2][0] == "fallback" and r2[0].meta["director"]["fallback"] is True
    assert r2[0].directive["action"].startswith("respond to the user as the")
    assert st["sources"]["reasked"] == 1 and st["sources"]["fallback"] >= 1
    assert st["decisions"] == sum(st["sources"].values())
    agg = decision_stats([t])["mascot"]["director"]
    assert agg["fallbacks"] == st["fallbacks"] and agg["sources"] == st["sources"]
    warn = fallback_warnings(decision_stats([t]), max_share=0.1)
    assert len(warn) == 1 and warn[0].startswith("warning: the Director of mascot fell back on")
    assert fallback_warnings(decision_stats([t]), max_share=1.0) == []


def test_run_prints_the_fallback_warning_above_the_share_the_user_sets(tmp_path, fake_model, tmp_cache, capsys):
    from tests.cli_helpers import run_cli

    fake_model("fbw", text_responder(director=lambda req: '{"speaker": "Zed"}'))  # every directive falls back
    base = ["run", "--task", "demo", "--limit", "1", "--system", "mascot", "--model", "fake/fbw"]
    base += ["--judges", "none", "--metrics", "none", "--no-report", "--no-progress"]
    code, _, err = run_cli([*base, "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    warn = [ln for ln in err.splitlines() if ln.startswith("warning: the Director of mascot fell back on")]
    assert len(warn) == 1 and "(100%, above 10%)" in warn[0], err
    code, _, err = run_cli([*base, "--out", str(tmp_path / "b"), "--max-fallback-share", "1"], capsys)
    assert code == 0, err
    assert "fell back" not in err
    code, _, err = run_cli([*base, "--out", str(tmp_path / "c"), "--max-fallback-share", "1.5"], capsys)
    assert code == 2 and "--max-fallback-share" in err and not (tmp_path / "c").exists()


# -- MultiAgentESC ------------------------------------------------------------------------------


def test_multiagentesc_strategies_and_votes_by_choice_scoring(tmp_path, fake_model, tmp_cache):
    def agent(req):
        last = req.messages[-1]["content"]
        if "In 2 short sentences" in last:
            return "The user is sad."
        m = re.search(r'strategy "([^"]+)"', last)
        return f"{speaker_of(req)} reply using {m.group(1) if m else '?'}"

    fake_model("me", text_responder(agent=agent))
    spec = fakes.script_probs("me", prefer({"Question": 3.0, "Providing Suggestions": 2.0}))
    _, ts, _ = run(tmp_path, ["multiagentesc"], spec, rounds=1)
    t = ts["multiagentesc"]
    st = t.stats["multiagentesc"]
    assert st["mode"] == "choices"
    assert st["strategy_sources"] == {"constrained": 3, "parsed": 0, "reasked": 0, "fallback": 0}
    assert st["vote_sources"]["constrained"] == 6 and st["invalid_votes"] == 0 and st["selection_fallbacks"] == 0
    m = t.agent_turns[0].meta
    assert m["strategies"] == ["Question", "Providing Suggestions"] and m["strategy_source"] == "constrained"
    assert m["votes"] == {"Catalyst": 1, "Beacon": 1} and t.agent_turns[0].text == "Anchor reply using Question"
    assert set(m["strategy_probs"]) == set(t.agent_turns[0].meta["strategy_probs"]) and len(m["strategy_probs"]) == 8
    agg = decision_stats([t])["multiagentesc"]["multiagentesc"]
    assert agg["strategy_valid_share"] == 1.0 and agg["vote_valid_share"] == 1.0 and agg["strategy_decisions"] == 3


# -- ablations ----------------------------------------------------------------------------------


def card_strings(t) -> list[str]:
    out = []
    for c in t.personas.values():
        out += [c.role, c.speaking_style, *c.traits, *c.never, *c.examples]
    return out


@pytest.mark.parametrize("mode", ["choices", "text"])
def test_mascot_p_has_no_persona_information_anywhere(tmp_path, fake_model, tmp_cache, mode):
    name = f"mp{mode}"
    # text mode: every directive invalid twice -> the fallback, which must not carry a role or trait either
    fake_model(name, text_responder(director=lambda req: '{"speaker": "Zed"}'))
    spec = fakes.script_probs(name, prefer(["Catalyst"])) if mode == "choices" else f"fake/{name}"
    _, ts, _ = run(tmp_path, ["mascot-p"], spec)
    t = ts["mascot-p"]
    prompts = ["\n".join(m["content"] for m in r.messages) for r in fakes.CALLS[name] if r.tag.startswith("system:mascot-p")]
    assert prompts
    strings = card_strings(t)
    leaks = [s for s in strings for p in prompts if s in p]
    assert leaks == []
    for x in t.agent_turns:
        assert not any(s in json.dumps(x.directive) for s in strings), x.directive
    if mode == "text":
        assert all(x.directive["source"] == "fallback" and x.directive["action"] == "respond to the user" for x in t.agent_turns)


def test_mascot_c_keeps_every_prompt_of_mascot_but_the_order(tmp_path, fake_model, tmp_cache):
    task = load_task("demo")
    spec = fake_model("mc", text_responder())
    m = build_system("mascot", task, model=spec)
    c = build_system("mascot-c", task, model=spec)
    state = new_state(task, emo_context(), "INTJ", m, seed=0)
    state.round = 1
    state.dialogue_id = "same"  # the dialogue id names the system; compare everything else
    from mascot_eval.transcript import Turn

    state.turns.append(Turn(round=1, speaker="user", text="I failed my exam."))
    opts = [{"label": "1", "text": "Anchor (emotional validator)"}]
    for ask in (
        {"ask": "speaker", "options": opts},
        {"ask": "action", "options": opts, "speaker": "Anchor"},
        {"ask": "directive"},
    ):
        assert m.templates.render(
            m.director.template, **m.director.variables(m.prompt_vars(state), [], [], **ask)
        ) == c.templates.render(c.director.template, **c.director.variables(c.prompt_vars(state), [], [], **ask))
    d = {"speaker": "Catalyst", "action": "ask", "tone": "curious", "source": "constrained"}
    card = m.by_name["Catalyst"]
    assert m.templates.render(m.template("agent"), **m.prompt_vars(state, card, directive=d)) == c.templates.render(
        c.template("agent"), **c.prompt_vars(state, card, directive=d)
    )
    assert m.models == c.models and m.config.decoding == c.config.decoding
    assert m.options.model_dump(exclude={"order"}) == c.options.model_dump(exclude={"order"})
    assert set(m.config.checkpoint) == set(c.config.checkpoint)


def test_mascot_c_speakers_follow_the_random_order_with_the_directors_actions(tmp_path, fake_model, tmp_cache):
    fake_model("mc2", text_responder())
    spec = fakes.script_probs("mc2", prefer({"nobody": 4.0, "Beacon": 2.0, "ask one open question": 2.0}, position_bias=0.0))
    pairs = [(emo_context(i), None) for i in range(4)]
    _, _, rd = run(tmp_path, ["mascot-c"], spec, pairs=pairs, rounds=1)
    firsts = set()
    for t in rd.transcripts():
        x = t.agent_turns[0]
        assert x.speaker == x.meta["order"][0] and x.meta["director"]["picked"] == "Beacon"
        assert x.directive["action"] == "ask one open question to understand more" and x.directive["source"] == "constrained"
        assert len(t.agent_turns) == 1  # the Director ended the round ("nobody" preferred)
        firsts.add(x.speaker)
    assert len(firsts) > 1


# -- transcript ---------------------------------------------------------------------------------


def test_transcript_domain_is_the_contexts(tmp_path, fake_model, tmp_cache):
    spec = fake_model("dom", text_responder())
    _, ts, _ = run(tmp_path, ["zero-shot"], spec, pairs=[(work_context(), None)], rounds=1)
    assert load_task("demo").domain == "emotional" and ts["zero-shot"].domain == "workplace"


def test_report_html_shows_the_decision_counts_and_marks_every_fallback(tmp_path, fake_model, tmp_cache, capsys):
    """The HTML report of a text-only Director run: the decisions section holds the summary's counts per
    source, and each directive in the transcript browser carries its source, fallbacks marked."""
    from tests.cli_helpers import run_cli
    from tests.test_report import Doc

    def director(req):
        last = req.messages[-1]["content"]
        if "Already spoke this round" in last:
            return '{"speaker": "none"}'
        if last.startswith("Invalid:"):
            return "still no idea"
        return '{"speaker": "Beacon", "action": "cheer", "tone": "bright"}' if "round 1 reply" not in str(req.messages) else "?"

    agent = lambda req: f"{speaker_of(req)}: round 1 reply."  # noqa: E731
    spec = fake_model("txh", text_responder(director=director, agent=agent))
    _, ts, rd = run(tmp_path, ["mascot"], spec, rounds=2)
    st = ts["mascot"].stats["director"]
    assert st["sources"]["parsed"] >= 1 and st["sources"]["fallback"] >= 1
    code, _, err = run_cli(["report", str(rd.path), "--n-boot", "100"], capsys)
    assert code == 0, err
    doc = Doc((rd.path / "report.html").read_text(encoding="utf-8"))
    assert "decisions" in doc.sections
    tab = doc.table("decisions", "decision").set_index("decision")
    row = tab.loc["director"]
    assert row["system"] == "mascot" and row["mode"] == "text"
    assert int(row["decisions"]) == st["decisions"] and all(int(row[s]) == n for s, n in st["sources"].items())
    dirs = re.findall(r'<div class="dir( fallback)?">Director \((\w+)\):', doc.sections["transcripts"])
    assert len(dirs) == len(ts["mascot"].agent_turns)
    assert [src for _, src in dirs].count("fallback") == st["sources"]["fallback"]
    assert all((mark == " fallback") == (src == "fallback") for mark, src in dirs)  # exactly the fallbacks are marked


def test_openai_director_sends_response_format_json_schema_and_is_constrained(tmp_path, tmp_cache, monkeypatch):
    """The Director on an `openai/` model, against a scripted OpenAI server on 127.0.0.1: its requests
    carry response_format json_schema with the speakers still allowed as an enum (ending not allowed
    before anyone spoke), speakers' and the user's requests carry none, and the directives are
    'constrained'."""
    from tests.scripted_server import ScriptedServer

    srv: ScriptedServer

    def respond(model, messages, n):
        rf = srv.requests[n - 1]["body"].get("response_format")
        if rf is None:
            return "A plain reply."
        allowed = rf["json_schema"]["schema"]["properties"]["speaker"]["enum"]
        pick = "none" if "none" in allowed else allowed[-1]
        return json.dumps({"speaker": pick, "action": "ask what felt hardest", "tone": "warm"})

    srv = ScriptedServer(respond)
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-scripted-000000")
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{srv.port}/v1")
        _, ts, _ = run(tmp_path, ["mascot"], "openai/gpt-scripted", rounds=1)
    finally:
        srv.close()
    t = ts["mascot"]
    assert t.stats["director"]["mode"] == "schema"
    with_rf = [r["body"]["response_format"] for r in srv.requests if "response_format" in r["body"]]
    assert with_rf and all(rf["type"] == "json_schema" and rf["json_schema"]["name"] == "answer" for rf in with_rf)
    assert with_rf[0]["json_schema"]["schema"]["properties"]["speaker"]["enum"] == AGENTS
    assert "none" in with_rf[1]["json_schema"]["schema"]["properties"]["speaker"]["enum"]
    assert len(with_rf) == t.stats["director"]["decisions"]
    assert [x.speaker for x in t.agent_turns] == ["Beacon"]
    assert all(x.directive["source"] == "constrained" for x in t.agent_turns)
