"""Echo / sycophancy metrics, self-repetition by cosine, inter-agent cosine: hand-computed values
with a table embedder, and echoing systems scoring as more redundant than diverse ones."""

from __future__ import annotations

import numpy as np
import pytest

from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.echo import is_agreement_opener, is_restatement_opener
from tests.metric_helpers import TableEmbedder, dialogue, one, values


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Absolutely, that sounds hard.", True),
        ("absolutely!", True),
        ("Yes you can do it.", False),  # interjection not followed by punctuation
        ("Yes, and then what?", True),
        ("Anchor, I agree with you completely.", True),  # addressee stripped
        ("User: great point!", True),
        ("  \"Exactly right,\" I'd say.", True),
        ("I agreed to go there once.", False),  # "i agree" followed by a letter
        ("Rightly so, it is hard.", False),
        ("I couldn\u2019t agree more.", True),  # typographic apostrophe
        ("Have you tried writing it down?", False),
        ("", False),
    ],
)
def test_agreement_opener(text, expected):
    assert is_agreement_opener(text, ["Anchor", "Catalyst"]) is expected


def test_restatement_opener():
    prev = "I feel stuck in my job search and nobody answers."
    # content tokens of the first sentence: feel stuck job search -> all 4 in prev
    assert is_restatement_opener("You feel stuck with your job search. Try this.", prev)
    # 2 of 4 content tokens occur in prev: 50 % < 60 %
    assert not is_restatement_opener("Your job hunt feels slow today.", "my job feels")
    # fewer than 3 content tokens: never a restatement
    assert not is_restatement_opener("You feel stuck.", prev)
    # only the first sentence counts
    assert not is_restatement_opener("Let us plan tomorrow morning together. You feel stuck in job search.", prev)


def test_echo_rows_partners_and_rates_by_hand():
    d = dialogue(
        [
            ("the cat sat", [("A", "the cat ran"), ("B", "Absolutely, the cat ran"), ("C", "dogs bark")]),
            ("new topic here", [("A", "the cat ran"), ("B", "something else entirely")]),
        ],
        agents=["A", "B", "C"],
    )
    df = compute(
        [d], ["echo_prev_agent_rougeL", "echo_user_rougeL", "agreement_opener", "restatement_opener", "empty_opener_rate"]
    )
    # previous agent in the same round: B <- A, C <- B (round 1), B <- A (round 2); A has none
    assert values(df, "echo_prev_agent_rougeL", agent="A") == []
    assert values(df, "echo_prev_agent_rougeL", agent="B") == [pytest.approx(2 * 3 / 4 * 1 / (3 / 4 + 1)), 0.0]
    assert values(df, "echo_prev_agent_rougeL", agent="C") == [0.0]
    # user partner: the round's user turn
    assert values(df, "echo_user_rougeL", agent="A") == [pytest.approx(2 / 3), 0.0]
    assert values(df, "agreement_opener") == [0.0, 1.0, 0.0, 0.0, 0.0]
    # restatement of the immediately preceding turn (user for the first agent):
    # B r1 "absolutely the cat ran": content absolutely cat ran -> 2/3 in "the cat ran" = 0.67 >= 0.6
    assert values(df, "restatement_opener") == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert one(df, "empty_opener_rate") == pytest.approx(1 / 5)


def test_cosine_metrics_by_hand_with_table_embedder():
    s2 = np.sqrt(0.5)
    table = {
        "u1": [1, 0, 0],
        "u2": [0, 0, 1],
        "a1": [1, 0, 0],
        "b1": [s2, s2, 0],
        "c1": [0, 1, 0],
        "a2": [0, 1, 0],
        "b2": [s2, s2, 0],
    }
    emb = TableEmbedder(table)
    d = dialogue([("u1", [("A", "a1"), ("B", "b1"), ("C", "c1")]), ("u2", [("A", "a2"), ("B", "b2")])])
    df = compute(
        [d], ["inter_agent_cosine", "echo_prev_agent_cosine", "echo_user_cosine", "self_repetition_cosine"], embedder=emb
    )
    # round 1 pairs: a1.b1 = s2, a1.c1 = 0, b1.c1 = s2 -> mean 2 s2 / 3; round 2: a2.b2 = s2
    assert one(df, "inter_agent_cosine", round=1) == pytest.approx(2 * s2 / 3, abs=1e-6)
    assert one(df, "inter_agent_cosine", round=2) == pytest.approx(s2, abs=1e-6)
    assert values(df, "echo_prev_agent_cosine") == [pytest.approx(s2, abs=1e-6)] * 3
    assert values(df, "echo_user_cosine") == pytest.approx([1, s2, 0, 0, 0], abs=1e-6)
    # second turns: A a2 vs a1 -> 0; B b2 vs b1 -> 1 (max over earlier turns)
    assert values(df, "self_repetition_cosine", agent="A") == [pytest.approx(0, abs=1e-6)]
    assert values(df, "self_repetition_cosine", agent="B") == [pytest.approx(1, abs=1e-6)]
    # every distinct text was embedded exactly once, in one call, shared by all four metrics
    assert len(emb.calls) == 1 and sorted(emb.calls[0]) == sorted(set(emb.calls[0]))
    assert set(table) <= set(emb.calls[0])


def _system(kind: str, n: int = 6) -> list:
    """An echoing system (agents restate each other and agree) or a diverse one, on the same user turns."""
    users = [
        "I failed my driving test again and feel stupid.",
        "My sister never calls me back.",
        "I have an exam tomorrow and cannot sleep.",
        "My dog is sick and the vet is expensive.",
        "I got passed over for a promotion.",
        "My best friend is moving abroad.",
    ]
    diverse = [  # per round: three replies with different content and wording
        [
            ("Anchor", "That sounds painful; feeling stupid after trying hard is so common."),
            ("Catalyst", "What went wrong on the day, nerves or one specific manoeuvre?"),
            ("Beacon", "Plenty of excellent drivers needed three attempts; book a mock test first."),
        ],
        [
            ("Anchor", "Take a breath tonight, you deserve some rest before deciding anything."),
            ("Catalyst", "Could a friend with a car give you extra practice on weekends?"),
            ("Beacon", "Write down two moments that went well, because they matter too."),
        ],
        [
            ("Anchor", "Whatever happens next, your worth is not measured by one exam."),
            ("Catalyst", "Shall we sketch a small plan with dates for the next attempt?"),
            ("Beacon", "Celebrate the progress: last month you could not even park."),
        ],
    ]
    out = []
    for i in range(n):
        user = users[i % len(users)]
        rounds = []
        for r in range(3):
            if kind == "echo":
                base = f"I hear you, {user.lower().rstrip('.')} and that is really hard."
                replies = [("Anchor", base), ("Catalyst", "Absolutely, " + base), ("Beacon", "I agree, " + base)]
            else:
                replies = diverse[r]
            rounds.append((user, replies))
        out.append(dialogue(rounds, system=kind, ctx=f"c{i}"))
    return out


def test_echoing_system_is_more_redundant_than_diverse_one():
    names = [
        "inter_agent_selfbleu",
        "inter_agent_rougeL",
        "echo_prev_agent_rougeL",
        "echo_user_rougeL",
        "self_repetition_bleu",
        "agreement_opener",
        "empty_opener_rate",
        "distinct_2",
        "distinct_2_corpus",
        "entropy_2_corpus",
    ]
    df = compute(_system("echo") + _system("diverse"), names)
    mean = df.groupby(["metric", "system"])["value"].mean()
    for m in names[:7]:
        assert mean[m, "echo"] > mean[m, "diverse"] + 0.2, m
    for m in names[7:]:
        assert mean[m, "echo"] < mean[m, "diverse"], m
    assert mean["inter_agent_selfbleu", "echo"] > 0.6 and mean["inter_agent_selfbleu", "diverse"] < 0.1
