"""The scripted, checkable judge (`judges/checks.yaml`, mode: rules): scores are deterministic checks,
computable by hand; it runs through the same judging paths as model judges (judge_transcript,
score_response, `mascot-eval judge`), and a malformed spec is refused with one line."""

from __future__ import annotations

import asyncio

import pytest

from mascot_eval.errors import UserError
from mascot_eval.judges.rules import score_reply, turn_checks
from mascot_eval.judges.specs import resolve_judge
from mascot_eval.transcript import Transcript, Turn, make_dialogue_id

from tests.judge_helpers import played  # noqa: E402

RULES = resolve_judge("checks").rules


def _t(turns: list[tuple[int, str, str]]) -> Transcript:
    return Transcript(
        dialogue_id=make_dialogue_id("demo", "c1", None, "mascot"),
        task="demo",
        task_version="1",
        split="in_domain",
        domain="emotional",
        context_id="c1",
        system="mascot",
        system_config_hash="h",
        persona_group="emotional",
        agents=["Anchor", "Catalyst", "Beacon"],
        turns=[Turn(round=r, speaker=s, text=x) for r, s, x in turns],
        context={"situation": "failed an exam", "emotion": "sad"},
        personas=played(["Anchor", "Catalyst", "Beacon"]),
    )


def test_turn_checks_by_hand():
    user = "I failed my licensing exam by four points after months of studying."
    ok = turn_checks(
        RULES, "catalyst", "That sounds so hard after all that studying. What part of the exam felt closest?", user, []
    )
    assert ok == {"emotion": True, "empathy": True, "consistency": True, "relevance": True, "contribution": True}
    bad = turn_checks(RULES, "catalyst", "I failed my licensing exam by four points after months of studying", user, [])
    assert bad["consistency"] is False  # no question
    assert bad["contribution"] is False  # echoes the user
    assert bad["relevance"] is False  # no sentence end
    long = " ".join(["word"] * 40) + "."
    assert turn_checks(RULES, "beacon", long, user, [])["relevance"] is False
    assert turn_checks(RULES, "beacon", "Your effort shows real strength here.", user, [])["consistency"] is True
    assert turn_checks(RULES, "beacon", "Maybe take a walk today.", user, [])["consistency"] is False
    assert turn_checks(RULES, "nobody", "Maybe take a walk today.", user, [])["consistency"] is True  # no check defined


def test_score_reply_uses_the_round_so_far():
    history = [
        {"name": "user", "content": "My dog has surgery tomorrow."},
        {"name": "Anchor", "content": "That sounds frightening, waiting for tomorrow."},
    ]
    s, why = score_reply(RULES, "catalyst", history, "That sounds frightening, waiting for tomorrow.")
    assert s["contribution"] == 1.0 and "contribution: failed in 1 of 1" in why  # repeats Anchor
    s2, _ = score_reply(RULES, "catalyst", history, "What would help you feel less alone tonight?")
    assert s2["consistency"] == 5.0 and s2["contribution"] == 5.0


def test_judge_transcript_rows_agent_and_group():
    from mascot_eval.judges.score import judge_transcript

    t = _t(
        [
            (1, "user", "I failed my exam by four points."),
            (1, "Anchor", "It makes sense to feel crushed about the exam."),
            (1, "Catalyst", "What would you tell a friend who missed by four points?"),
            (1, "Beacon", "ok"),
            (2, "user", "I guess I would tell them to try again."),
            (2, "Catalyst", "I guess I would tell them to try again."),
        ]
    )
    rows = asyncio.run(judge_transcript("checks", t))
    by = {(r["level"], r["agent"], r["criterion"]): r for r in rows}
    assert all(r["status"] == "scored" and r["judge"] == "checks" and r["judge_model"] == "rules" for r in rows)
    # Catalyst: 2 turns, the second echoes the user (no question, no new bigrams): consistency 1 of 2 -> 3.0
    assert by[("agent", "Catalyst", "consistency")]["score"] == pytest.approx(3.0)
    assert by[("agent", "Catalyst", "contribution")]["score"] == pytest.approx(3.0)
    assert by[("agent", "Beacon", "relevance")]["score"] == 1.0  # "ok": too short
    assert by[("agent", "Anchor", "consistency")]["score"] == 5.0
    assert by[("agent", "Anchor", "consistency")]["weighted_score"] == 5.0
    assert by[("agent", "Anchor", "emotion")]["score_100"] == 100.0
    # group: 4 agent turns; engagement = rounds with a question: round 1 yes, round 2 no -> 3.0
    assert by[("group", None, "engagement")]["score"] == pytest.approx(3.0)
    assert by[("group", None, "fidelity")]["score"] == pytest.approx(1 + 4 * 2 / 4)
    assert "passed" in by[("group", None, "fidelity")]["rationale"]
    # deterministic: the same rows again
    again = asyncio.run(judge_transcript("checks", t))
    assert [r["score"] for r in again] == [r["score"] for r in rows]


def test_agent_that_never_spoke_is_unscored_not_zero():
    from mascot_eval.judges.score import judge_transcript

    t = _t([(1, "user", "Hello."), (1, "Anchor", "Hello, it is good to hear from you today.")])
    rows = asyncio.run(judge_transcript("checks", t, levels=("agent",)))
    beacon = [r for r in rows if r["agent"] == "Beacon"]
    assert beacon and all(r["status"] == "unscored" and r["score"] is None for r in beacon)


def test_score_response_through_the_public_api():
    from mascot_eval.judges.score import score_response
    from mascot_eval.personas import get_group

    _, cards = get_group("emotional")
    catalyst = next(c for c in cards if c.id == "catalyst")
    s = asyncio.run(
        score_response(
            "checks",
            persona=catalyst,
            history=[{"name": "user", "content": "I lost my job today."}],
            response="Losing your job today is hard. What do you need most right now?",
        )
    )
    assert s["consistency"] == 5.0 and s["relevance"] == 5.0 and s["empathy"] == 5.0


def test_rules_field_and_mode_go_together(tmp_path):
    from mascot_eval.judges.specs import JudgeSpec, check_mode

    with pytest.raises(UserError, match="field 'rules' is required with mode: rules"):
        check_mode(JudgeSpec(name="x", model="rules", mode="rules"))
    with pytest.raises(UserError, match="field 'rules'"):
        check_mode(JudgeSpec(name="x", model="embedded", rules=RULES))


def test_rules_judge_cannot_do_threeway():
    from mascot_eval.judges.score import Judge

    j = Judge("checks")
    with pytest.raises(UserError, match="'mode' is rules"):
        asyncio.run(j.ask_with("prompt", lambda text, shown: None, None))


def test_rules_judge_passes_the_check_phase_and_judges_a_run(tmp_path, capsys):
    """`--judges checks` goes through the CLI's check phase (its model is a label, no backend) and judges."""
    from tests.cli_helpers import run_cli

    code, _, err = run_cli(["check", "--task", "demo", "--system", "zero-shot", "--judges", "checks"], capsys)
    assert code == 0, err
    rd = tmp_path / "run"
    from mascot_eval.runs.rundir import RunDir

    r = RunDir(rd, create=True)
    r.append_transcript(_t([(1, "user", "I failed my exam."), (1, "Catalyst", "What part felt hardest?")]))
    code, out, err = run_cli(["judge", str(rd), "--judges", "checks", "--no-progress"], capsys)
    assert code == 0, err
    rows = list(RunDir(rd).judgments())
    assert rows and {r["judge"] for r in rows} == {"checks"}
    assert all(r["status"] == "scored" for r in rows if r["agent"] in ("Catalyst", None))
    assert all(
        r["status"] == "unscored" and r["reason"].startswith("no_turns") for r in rows if r["agent"] in ("Anchor", "Beacon")
    )
