"""Pair construction: the delta filter, unscored candidates, identical texts, held-out split by context."""

from __future__ import annotations

import pytest

from mascot_eval.train.judging import aggregate
from mascot_eval.train.pairs import build_pairs, split_heldout


def _row(ctx: str, k: int, agg, persona: str = "anchor") -> dict:
    return {"key": f"demo:{ctx}:{persona}:{k}", "task": "demo", "context_id": ctx, "persona": persona, "aggregate": agg}


def test_aggregate_is_mean_of_five_or_none():
    full = {"emotion": 5, "empathy": 4, "consistency": 3, "relevance": 2, "contribution": 1}
    assert aggregate(full) == 3.0
    assert aggregate({**full, "relevance": None}) is None  # a partial score is not an aggregate


def test_delta_filter_and_direction():
    judged = [_row("c1", 0, 4.0), _row("c1", 1, 3.6), _row("c1", 2, 3.5), _row("c1", 3, None), _row("c2", 0, 2.0)]
    texts = {r["key"]: f"text {r['key']}" for r in judged}
    pairs, st = build_pairs(judged, texts, delta=0.5)
    # c1: (4.0, 3.6) diff 0.4 < 0.5 dropped; (4.0, 3.5) diff 0.5 kept; (3.6, 3.5) dropped; c2 alone
    assert [(p["chosen_key"][-1], p["rejected_key"][-1]) for p in pairs] == [("0", "2")]
    assert pairs[0]["chosen_score"] - pairs[0]["rejected_score"] == pytest.approx(0.5)
    assert st.candidates == 5 and st.scored == 4 and st.unscored == 1
    assert st.compared == 3 and st.below_delta == 2 and st.kept == 1
    assert "1 pairs kept from 5 candidates (4 scored, 1 unscored" in st.explain(0.5)


def test_pairs_never_cross_context_or_persona():
    judged = [_row("c1", 0, 5.0), _row("c2", 0, 1.0), _row("c1", 1, 1.0, persona="beacon")]
    pairs, st = build_pairs(judged, {r["key"]: r["key"] for r in judged}, delta=0.5)
    assert pairs == [] and st.compared == 0


def test_chosen_is_the_higher_whatever_the_order_and_identical_texts_dropped():
    judged = [_row("c1", 0, 2.0), _row("c1", 1, 4.5), _row("c1", 2, 1.0)]
    texts = {judged[0]["key"]: "same", judged[1]["key"]: "better", judged[2]["key"]: "same "}
    pairs, st = build_pairs(judged, texts, delta=0.5)
    assert {(p["chosen"], p["rejected"]) for p in pairs} == {("better", "same"), ("better", "same ")}
    assert st.identical_text == 1  # (2.0 "same", 1.0 "same ") would teach nothing


def test_heldout_split_by_whole_context():
    pairs = [{"task": "demo", "context_id": f"c{i}", "x": j} for i in range(5) for j in range(2)]
    out = split_heldout(pairs, 0.4, seed=0)
    held = {p["context_id"] for p in out if p["split"] == "heldout"}
    train = {p["context_id"] for p in out if p["split"] == "train"}
    assert len(held) == 2 and not held & train
    assert split_heldout(pairs, 0.4, seed=0) == out  # deterministic
    assert all(p["split"] == "train" for p in split_heldout(pairs, 0.0))
