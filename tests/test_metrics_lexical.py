"""Distinct-n, n-gram entropy, length statistics and the tokenizer, on hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mascot_eval.metrics import METRICS, UNITS
from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.ngrams import NgramIndex, distinct_and_entropy
from mascot_eval.metrics.tokenize import tokenize
from tests.metric_helpers import dialogue, one, values

LEXICAL = [f"{k}_{n}{s}" for k in ("distinct", "entropy") for n in (1, 2, 3) for s in ("", "_agent", "_corpus")]
LENGTH = [
    "turn_length_tokens",
    "user_turn_length_tokens",
    "agent_turns_per_round",
    "dialogue_rounds",
    "dialogue_agent_tokens",
    "agent_participation",
]


def test_tokenizer_example():
    assert tokenize("I hear you. That's hard!") == ["i", "hear", "you", ".", "that's", "hard", "!"]
    assert tokenize("Don\u2019t  STOP-now...") == ["don\u2019t", "stop", "-", "now", ".", ".", "."]
    assert tokenize("   ") == []


def _example():
    # A: "a b a" (r1), "b b" (r2); B: "a c" (r1). User turns must never count.
    return dialogue([("a a a a z", [("A", "a b a"), ("B", "a c")]), ("z z", [("A", "b b")])], agents=["A", "B", "C"])


def test_distinct_and_entropy_by_hand():
    df = compute([_example()], LEXICAL)
    # dialogue pool of unigrams: a b a | a c | b b -> a:3 b:3 c:1, 7 tokens
    assert one(df, "distinct_1") == pytest.approx(3 / 7)
    h = -(2 * (3 / 7) * math.log2(3 / 7) + (1 / 7) * math.log2(1 / 7))
    assert one(df, "entropy_1") == pytest.approx(h)
    # bigrams never cross turns: (a b) (b a) | (a c) | (b b) -> 4 distinct of 4
    assert one(df, "distinct_2") == pytest.approx(1.0)
    assert one(df, "entropy_2") == pytest.approx(2.0)
    assert one(df, "distinct_3") == pytest.approx(1.0)  # only (a b a)
    assert one(df, "entropy_3") == 0.0
    # per agent: A has a b a b b -> 2 distinct of 5; B has a c
    assert one(df, "distinct_1_agent", agent="A") == pytest.approx(2 / 5)
    assert one(df, "distinct_1_agent", agent="B") == pytest.approx(1.0)
    pa = np.array([2 / 5, 3 / 5])
    assert one(df, "entropy_1_agent", agent="A") == pytest.approx(-(pa * np.log2(pa)).sum())
    assert values(df, "distinct_1_agent", agent="C") == []  # C never spoke
    # B has no trigram: no row, and the note says why
    assert values(df, "distinct_3_agent", agent="B") == []
    assert df.attrs["notes"]["distinct_3_agent: unit without 3-grams"] == 1
    # corpus = the single dialogue here
    assert one(df, "distinct_1_corpus") == pytest.approx(3 / 7)
    row = df[df["metric"] == "distinct_1_corpus"].iloc[0]
    assert row["dialogue_id"] is None and row["system"] == "sys" and row["unit"] == "corpus"


def test_corpus_pools_dialogues_of_one_system_and_task():
    d1 = dialogue([("u", [("A", "x y"), ("B", "x y")])], ctx="c1")
    d2 = dialogue([("u", [("A", "x z"), ("B", "w")])], ctx="c2")
    other = dialogue([("u", [("A", "q q q")])], ctx="c1", system="other")
    df = compute([d1, d2, other], ["distinct_1", "distinct_1_corpus", "distinct_2_corpus"])
    assert values(df, "distinct_1", dialogue_id=d1.dialogue_id) == [pytest.approx(2 / 4)]
    assert one(df, "distinct_1_corpus", system="sys") == pytest.approx(4 / 7)  # x y x y x z w
    assert one(df, "distinct_2_corpus", system="sys") == pytest.approx(2 / 3)  # (x y) (x y) (x z)
    assert one(df, "distinct_1_corpus", system="other") == pytest.approx(1 / 3)


def test_repeated_text_counts_every_time_it_is_said():
    d = dialogue([("u", [("A", "same words"), ("B", "same words")])])
    df = compute([d], ["distinct_1", "distinct_2"])
    assert one(df, "distinct_1") == pytest.approx(2 / 4)
    assert one(df, "distinct_2") == pytest.approx(1 / 2)


def test_distinct_matches_a_counter_on_random_texts():
    rng = np.random.default_rng(3)
    vocab = list("abcdefg")
    seqs = [[vocab[i] for i in rng.integers(0, 7, rng.integers(0, 9))] for _ in range(60)]
    sets = rng.integers(0, 5, len(seqs))
    idx = NgramIndex(seqs, max_n=3)
    for n in (1, 2, 3):
        d, e, total = distinct_and_entropy(idx, n, np.arange(len(seqs)), sets, 5)
        for s in range(5):
            grams = [tuple(q[i : i + n]) for k, q in enumerate(seqs) if sets[k] == s for i in range(len(q) - n + 1)]
            if not grams:
                assert np.isnan(d[s])
                continue
            counts = np.array([grams.count(g) for g in set(grams)], dtype=float)
            p = counts / counts.sum()
            assert total[s] == len(grams)
            assert d[s] == pytest.approx(len(set(grams)) / len(grams), abs=1e-12)
            assert e[s] == pytest.approx(-(p * np.log2(p)).sum(), abs=1e-12)


def test_length_and_turn_statistics_by_hand():
    df = compute([_example()], LENGTH)
    assert values(df, "turn_length_tokens", agent="A") == [3.0, 2.0]
    assert values(df, "turn_length_tokens", agent="B") == [2.0]
    assert values(df, "user_turn_length_tokens") == [5.0, 2.0]
    assert values(df, "agent_turns_per_round") == [2.0, 1.0]
    assert one(df, "dialogue_rounds") == 2.0
    assert one(df, "dialogue_agent_tokens") == 7.0
    assert one(df, "agent_participation", agent="A") == 1.0
    assert one(df, "agent_participation", agent="B") == 0.5
    assert one(df, "agent_participation", agent="C") == 0.0


def test_registry_every_metric_is_documented():
    names = METRICS.names()
    assert len(names) >= 40
    for name in names:
        m = METRICS.get(name)
        assert m.unit in UNITS and m.higher and len(m.description) > 30, name


def test_table_columns_and_units():
    df = compute([_example()], ["distinct_2", "turn_length_tokens", "distinct_2_corpus"])
    assert list(df.columns) == [
        "dialogue_id",
        "pair_key",
        "system",
        "task",
        "split",
        "domain",
        "agent",
        "round",
        "metric",
        "value",
        "unit",
    ]
    assert set(df["unit"]) == {"dialogue", "turn", "corpus"}
    turn_rows = df[df["metric"] == "turn_length_tokens"]
    assert list(turn_rows["round"]) == [1, 1, 2]
