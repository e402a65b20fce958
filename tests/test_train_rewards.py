"""Reward pieces: Bradley-Terry loss, format and composite rewards, directives, group redundancy."""

from __future__ import annotations

import math

import pytest

from mascot_eval.train.diversity import block_redundancy, containment
from mascot_eval.train.rewards import composite_reward, directive_format_reward, format_checks, format_reward
from mascot_eval.train.stage2 import group_term, impute_unscored

AGENTS = ["Anchor", "Catalyst", "Beacon"]


def test_bt_loss_matches_hand_computation():
    torch = pytest.importorskip("torch")
    from mascot_eval.train.reward_model import bt_loss

    rw, rl = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 1.0, 2.0])
    # -log sigmoid(1) = log(1 + e^-1); -log sigmoid(-1) = log(1 + e); -log sigmoid(0) = log 2
    hand = (math.log(1 + math.exp(-1)) + math.log(1 + math.e) + math.log(2)) / 3
    assert float(bt_loss(rw, rl)) == pytest.approx(hand, abs=1e-6)
    assert float(bt_loss(rw, rl)) == pytest.approx(0.7732, abs=1e-4)  # (0.3133 + 1.3133 + 0.6931) / 3
    # gradient pushes chosen up and rejected down
    a, b = torch.tensor([0.3], requires_grad=True), torch.tensor([0.1], requires_grad=True)
    bt_loss(a, b).backward()
    assert a.grad.item() < 0 < b.grad.item()


def test_format_reward_parts():
    good = "That sounds really hard. I'm here with you."
    assert format_reward(good, "Anchor", ["Catalyst", "Beacon"]) == 1.0
    assert format_reward("", "Anchor", ["Catalyst"]) == 0.0
    cut = "That sounds really hard and I think that you"
    assert format_checks(cut, "Anchor", ["Catalyst"], 120)["complete"] is False
    assert format_reward(cut, "Anchor", ["Catalyst"]) == 0.75
    impostor = "I hear you.\nCatalyst: What do you think happened?\nUser: I don't know."
    assert format_checks(impostor, "Anchor", ["Catalyst"], 120)["own_voice"] is False
    long = " ".join(["word"] * 30) + "."
    assert format_checks(long, "Anchor", [], 20)["length_ok"] is False


def test_composite_reward_weights():
    assert composite_reward(0.8, 1.0) == pytest.approx(0.8 + 0.5)
    assert composite_reward(-1.2, 0.5, rm_weight=2.0, format_weight=1.0) == pytest.approx(-2.4 + 0.5)
    assert composite_reward(0.0, 0.0) == 0.0


def test_directive_format_reward():
    assert directive_format_reward(None, True) == 1.0  # valid, nothing around the JSON
    assert directive_format_reward(None, False) == 0.75  # valid, with prose around it
    assert directive_format_reward("unknown_speaker", True) == 0.5  # JSON, but not a valid directive
    assert directive_format_reward("no_json", False) == 0.0


def test_redundancy_penalises_repeated_speakers_and_content():
    diverse = [
        ("Anchor", "That sounds painful, and your feelings make sense."),
        ("Catalyst", "What part of the result surprised you the most?"),
        ("Beacon", "Studying every evening shows real persistence."),
    ]
    echo = [
        ("Anchor", "That sounds painful, and your feelings make sense."),
        ("Anchor", "That sounds painful, and your feelings make sense to me."),
        ("Beacon", "That sounds painful and your feelings make sense."),
    ]
    d, e = block_redundancy(diverse, AGENTS), block_redundancy(echo, AGENTS)
    assert d.speaker == 0.0 and d.content < 0.2
    assert e.speaker == pytest.approx(0.5)  # one avoidable repeat in 2 follow-up turns
    assert e.content > 0.8 and e.penalty > d.penalty + 1.0
    # with more turns than agents some repeats are unavoidable and not penalised
    four = [("Anchor", "a b"), ("Catalyst", "c d"), ("Beacon", "e f"), ("Anchor", "g h")]
    assert block_redundancy(four, AGENTS).speaker == 0.0
    assert block_redundancy(diverse[:1], AGENTS).penalty == 0.0
    assert containment("the cat sat", "the cat sat down") == 1.0 and containment("", "x") == 0.0


def test_group_term_and_unscored_imputation():
    rows = [
        {"criterion": "fidelity", "score": 5},
        {"criterion": "relevance", "score": 3},
        {"criterion": "engagement", "score": None},
        {"criterion": "originality", "score": 1},
    ]
    assert group_term(rows, ["fidelity", "relevance", "engagement"], "generate") == pytest.approx((4 - 1) / 4)
    assert group_term([{"criterion": "fidelity", "score": None}], ["fidelity"], "generate") is None
    # an unscored block takes its siblings' mean (same state), never zero; a state with none scored stays None
    assert impute_unscored([0.5, None, 0.7, None], ["s1", "s1", "s1", "s2"]) == [0.5, pytest.approx(0.6), 0.7, None]


def test_stage2_reads_the_expected_digit_like_stage1():
    """A logprob judge's group rows: Stage 1 (score_response) uses the expected digit, so Stage 2 must too.
    (It read the argmax digit: blocks with expected 3.4 and 2.6 both looked like a flat 3.)"""
    rows = [
        {"criterion": "fidelity", "score": 3, "weighted_score": 3.4, "status": "scored"},
        {"criterion": "relevance", "score": 3, "weighted_score": 3.4, "status": "scored"},
    ]
    assert group_term(rows, ["fidelity", "relevance"], "logprob") == pytest.approx((3.4 - 1) / 4)
    assert group_term(rows, ["fidelity", "relevance"], "rules") == pytest.approx((3.4 - 1) / 4)
    # a generating judge's verdict is its integer (as score_response returns it for Stage 1)
    assert group_term(rows, ["fidelity", "relevance"], "generate") == pytest.approx((3 - 1) / 4)
    rows[0]["status"] = "unscored"
    assert group_term(rows, ["fidelity", "relevance"], "logprob") == pytest.approx((3.4 - 1) / 4)


class _OffsetScorer:
    """A reward model with a large constant per prompt (what Bradley-Terry leaves free) plus the reply's length."""

    def score(self, messages, replies):
        return [100.0 * len(m[0]["content"]) + len(r.split()) for m, r in zip(messages, replies)]


def test_stage1_reward_is_centred_on_pi_sft_candidates_at_the_same_state():
    from types import SimpleNamespace

    from mascot_eval.errors import UserError
    from mascot_eval.train.config import Stage1Reward
    from mascot_eval.train.stage1 import StateBaseline, persona_reward_fn

    prompts = {"s1": [{"role": "user", "content": "a"}], "s2": [{"role": "user", "content": "bbbbbbbb"}]}
    cands = [
        {"state": s, "messages": prompts[s], "text": t}
        for s in prompts
        for t in ("one two three.", "one two three four five.")  # 3 and 5 words: mean 4, within-state sd sqrt(2)
    ]
    scorer = _OffsetScorer()
    base = StateBaseline.from_candidates(scorer, cands)
    assert base.means == {"s1": 104.0, "s2": 804.0} and base.sd == pytest.approx(math.sqrt(2))
    cfg = SimpleNamespace(stage1=SimpleNamespace(reward=Stage1Reward(rm_weight=1.0, format_weight=0.0)))
    view = SimpleNamespace(clean=lambda text, card: text)
    card = SimpleNamespace(name="Anchor")
    reply = "one two three four five six."  # 6 words: 2 above pi_SFT's mean at either state
    fn = persona_reward_fn(scorer, card, [], cfg, view, base)
    got = fn([prompts["s1"], prompts["s2"]], [reply, reply], state=["s1", "s2"])
    # the raw scores differ by 700 between the two prompts; centred, the same gain reads the same
    assert got == pytest.approx([2 / math.sqrt(2)] * 2)
    raw = persona_reward_fn(scorer, card, [], cfg, view)([prompts["s1"], prompts["s2"]], [reply, reply])
    assert raw == [106.0, 806.0]
    # pi_SFT's own candidates average 0 at every state
    assert sum(
        fn([c["messages"] for c in cands], [c["text"] for c in cands], state=[c["state"] for c in cands])
    ) == pytest.approx(0)
    with pytest.raises(UserError, match="no pi_SFT candidates"):
        fn([prompts["s1"]], [reply], state=["elsewhere"])
