"""Systems: directive parsing/validation/fallback, text helpers, configs, templates and the systems CLI."""

from __future__ import annotations

import pytest

from mascot_eval.errors import UserError
from mascot_eval.personas import PersonaCard
from mascot_eval.systems.director import fallback, match_speaker, parse_directive
from mascot_eval.systems.multiagentesc import parse_vote, pick_strategies
from mascot_eval.systems.speak import split_reasoning
from mascot_eval.jsontext import json_objects, last_json_object
from mascot_eval.systems.text import clean_reply, most_consistent
from tests.cli_helpers import run_cli


def card(id_: str, name: str, role: str) -> PersonaCard:
    return PersonaCard(
        id=id_, name=name, role=role, traits=[f"{id_}-trait"], speaking_style="plain", never=["be rude"], examples=["one", "two"]
    )


CARDS = [
    card("anchor", "Anchor", "emotional validator"),
    card("catalyst", "Catalyst", "critical thinker"),
    card("action_guide", "Action Guide", "practical advisor"),
]


def test_valid_directive_json():
    d, reason = parse_directive('{"speaker": "Catalyst", "action": "ask why", "tone": "curious"}', CARDS, spoken=[])
    assert reason is None and d.to_dict() == {"speaker": "Catalyst", "action": "ask why", "tone": "curious", "source": "parsed"}


def test_last_json_object_wins_and_keys_and_names_are_case_insensitive():
    text = 'Plan: {"speaker": "Anchor", "action": "a", "tone": "b"} then actually {"SPEAKER": "the action guide", "Action": "list steps", "TONE": "brisk"}'
    d, reason = parse_directive(text, CARDS, spoken=[])
    assert reason is None and d.speaker == "Action Guide" and d.action == "list steps" and d.tone == "brisk"
    d, _ = parse_directive('{"agent": "ACTION_GUIDE", "action": "x", "tone": "y"}', CARDS, spoken=[])
    assert d.speaker == "Action Guide"


def test_paper_plain_format_is_accepted():
    text = "Agent: Anchor\nAction: validate the user's guilt and make them feel safe\nTone: calm and empathetic"
    d, reason = parse_directive(text, CARDS, spoken=[])
    assert reason is None and d.speaker == "Anchor" and d.tone == "calm and empathetic"


@pytest.mark.parametrize(
    "text,spoken,reason",
    [
        ("I think Anchor should talk.", [], "no_json"),
        ('{"speaker": "Bob", "action": "x", "tone": "y"}', [], "unknown_speaker"),
        ('{"speaker": "Anchor", "action": "x", "tone": "y"}', ["Anchor"], "repeat_speaker"),
        ('{"speaker": "Anchor", "tone": "y"}', [], "missing_action"),
        ('{"speaker": "Anchor", "action": "x", "tone": ""}', [], "missing_tone"),
        ('{"speaker": "none"}', [], "ended_too_early"),
        ('{"speaker": 3, "action": "x", "tone": "y"}', [], "speaker_not_text"),
    ],
)
def test_invalid_directives_name_the_reason(text, spoken, reason):
    d, got = parse_directive(text, CARDS, spoken=spoken)
    assert d is None and got == reason


def test_none_ends_the_round_once_enough_agents_spoke():
    d, reason = parse_directive('{"speaker": "None", "action": "", "tone": ""}', CARDS, spoken=["Anchor"])
    assert reason is None and d.speaker is None
    d, reason = parse_directive('{"speaker": "none"}', CARDS, spoken=["Anchor"], min_speakers=2)
    assert d is None and reason == "ended_too_early"


def test_repeat_allowed_when_configured():
    d, reason = parse_directive('{"speaker": "anchor", "action": "x", "tone": "y"}', CARDS, spoken=["Anchor"], allow_repeat=True)
    assert reason is None and d.speaker == "Anchor"


def test_fallback_is_next_unspoken_agent_in_group_order():
    assert fallback(CARDS, []).speaker == "Anchor"
    d = fallback(CARDS, ["Catalyst"])
    assert d.speaker == "Action Guide" and d.action == "respond to the user as the practical advisor"
    assert d.tone == "action_guide-trait"
    assert fallback(CARDS, ["Action Guide"]).speaker == "Anchor"
    assert fallback(CARDS, ["Anchor", "Catalyst", "Action Guide"]).speaker is None


def test_match_speaker_variants():
    assert match_speaker("The Anchor", CARDS).name == "Anchor"
    assert match_speaker("Anchor (emotional validator)", CARDS).name == "Anchor"
    assert match_speaker("Beacon", CARDS) is None


def test_json_objects_respect_braces_in_strings_and_skip_broken():
    text = 'x {"a": "has } brace"} y {broken: 1} z {"b": {"c": 2}}'
    assert [o for _, _, o in json_objects(text)] == [{"a": "has } brace"}, {"b": {"c": 2}}]
    assert last_json_object("no json here") is None


def test_clean_reply_strips_own_label_and_cuts_at_other_speakers():
    assert clean_reply("Anchor: I hear you.\nCatalyst: what if...", "Anchor", ["Catalyst"]) == "I hear you."
    assert clean_reply("**Anchor**: Steady now.\nUser: ok", "Anchor", ["Catalyst"]) == "Steady now."
    assert clean_reply("Catalyst: not mine", "Anchor", ["Catalyst"]) == ""


def test_most_consistent_picks_the_medoid():
    cands = [
        "you could talk to your manager today",
        "talk to your manager about it today",
        "bananas are yellow",
        "maybe talk with your manager",
    ]
    best, scores = most_consistent(cands)
    assert best in (0, 1) and scores[2] == min(scores)
    best, scores = most_consistent(["", "something real", "something else real"])
    assert best != 0 and scores[0] == -1.0
    assert most_consistent(["same", "same"])[0] == 0  # ties go to the lowest index


def test_split_reasoning():
    assert split_reasoning("Thoughts: they are sad.\nReply: I'm here for you.") == (
        "I'm here for you.",
        "Thoughts: they are sad.",
    )
    reply, thought = split_reasoning("Thoughts: hmm\nI'm here.")
    assert thought is None and reply == "I'm here."


def test_pick_strategies_and_votes():
    strategies = ["Question", "Reflection of feelings", "Providing Suggestions"]
    assert pick_strategies("Use reflection of feelings, then a question.", strategies, 2) == (
        ["Reflection of feelings", "Question"],
        False,
    )
    assert pick_strategies("whatever", strategies, 2) == (["Question", "Reflection of feelings"], True)
    assert parse_vote("I pick 2.", 3) == 1
    assert parse_vote("candidate 7", 3) is None and parse_vote("none", 3) is None


# configs, plug-ins and the CLI


def test_every_shipped_system_loads_and_builds(tmp_path):
    from mascot_eval.systems.config import load_system_config, system_files
    from mascot_eval.systems.factory import build_system
    from mascot_eval.taskspec import load_task

    names = set(system_files())
    expected = {
        "mascot",
        "mascot-p",
        "mascot-c",
        "zero-shot",
        "zero-shot-cot",
        "few-shot",
        "few-shot-cot",
        "sft",
        "self-consistency",
        "multiagentesc",
        "single-agent",
    }
    assert expected <= names
    task = load_task("demo")
    for name in sorted(expected - {"sft"}):
        s = build_system(name, task, model="fake/x")
        assert s.config.name == name == load_system_config(name).name
        assert len(s.config_hash()) == 16
    with pytest.raises(UserError, match="needs a fine-tuned model"):
        build_system("sft", task, model="fake/x")


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_config_errors_are_one_line(tmp_path):
    from mascot_eval.systems.config import load_system_config
    from mascot_eval.systems.factory import build_system
    from mascot_eval.taskspec import load_task

    task = load_task("demo")
    p = _write(tmp_path / "bad-opt.yaml", "name: bad-opt\nkind: mascot\noptions: {ordr: random}\n")
    with pytest.raises(UserError, match=r"bad-opt.yaml:3: field 'options.ordr': unknown field"):
        build_system(str(p), task, model="fake/x")
    p = _write(tmp_path / "bad-kind.yaml", "name: bad-kind\nkind: masco\n")
    with pytest.raises(UserError, match="unknown system kind 'masco'"):
        build_system(str(p), task, model="fake/x")
    p = _write(tmp_path / "bad-role.yaml", "name: bad-role\nkind: prompted\ntemplates: {director: x.j2}\n")
    with pytest.raises(UserError, match="unknown role"):
        build_system(str(p), task, model="fake/x")
    p = _write(tmp_path / "other.yaml", "name: wrong\nkind: prompted\n")
    with pytest.raises(UserError, match="make them equal"):
        load_system_config(str(p))
    with pytest.raises(UserError, match="unknown system 'mascott'.*did you mean 'mascot'"):
        load_system_config("mascott")


def test_template_render_error_names_template_and_variable(tmp_path):
    from mascot_eval.systems.factory import build_system
    from mascot_eval.systems.engine import new_state
    from mascot_eval.taskspec import load_task
    from mascot_eval.data.loaders import load_contexts

    _write(tmp_path / "templates" / "broken.j2", "[user]\nHello {{ agent.name }} about {{ no_such_var }}\n")
    p = _write(tmp_path / "brk.yaml", "name: brk\nkind: prompted\ntemplates: {agent: broken.j2}\n")
    task = load_task("demo")
    s = build_system(str(p), task, model="fake/x")
    state = new_state(task, load_contexts(task, limit=1)[0], None, s, seed=0)
    with pytest.raises(UserError, match=r"broken.j2:2: 'no_such_var' is undefined; variables available: agent, "):
        s.preflight(state)


def test_systems_cli_list_and_show(capsys):
    assert run_cli(["systems", "list"])[0] == 0
    out = capsys.readouterr().out
    for name in ("mascot", "mascot-p", "mascot-c", "multiagentesc", "self-consistency", "single-agent", "prompted"):
        assert f"\n{name} " in out
    assert run_cli(["systems", "show", "mascot", "--model", "fake/x"])[0] == 0
    out = capsys.readouterr().out
    assert "agents (emotional): Anchor, Catalyst, Beacon" in out and "director: fake/x" in out
    assert run_cli(["systems", "show", "nosuch"])[0] == 2
    assert "unknown system 'nosuch'" in capsys.readouterr().err
