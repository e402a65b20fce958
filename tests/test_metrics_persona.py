"""Persona distinctiveness and fidelity: hand-computed values with a table embedder, separability
low for collapsed agents and high for distinct ones (synthetic vectors and the real MiniLM)."""

from __future__ import annotations

import numpy as np
import pytest

from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.context import MetricContext
from mascot_eval.metrics.persona import separability
from mascot_eval.personas import get_group
from tests.metric_helpers import AGENTS, TableEmbedder, dialogue, one, values


def test_centroid_distance_by_hand():
    table = {"a1": [1, 0], "a2": [1, 0], "b1": [0.6, 0.8], "b2": [0.6, 0.8], "u": [0, 1]}
    d1 = dialogue([("u", [("A", "a1"), ("B", "b1")])], ctx="c1")
    d2 = dialogue([("u", [("A", "a2"), ("B", "b2")])], ctx="c2")
    solo = dialogue([("u", [("A", "a1")])], ctx="c3", system="solo")
    df = compute([d1, d2, solo], ["persona_centroid_distance", "persona_centroid_distance_corpus"], embedder=TableEmbedder(table))
    assert values(df, "persona_centroid_distance", system="sys") == pytest.approx([0.4, 0.4])
    assert one(df, "persona_centroid_distance_corpus", system="sys") == pytest.approx(0.4)
    # centroids are normalised means: A = mean(e1, e2), B = e2 -> 1 - cos
    table3 = {"x": [1, 0], "y": [0, 1], "z": [0, 1], "u": [1, 1]}
    d3 = dialogue([("u", [("A", "x"), ("B", "z")]), ("u", [("A", "y")])])
    df3 = compute([d3], ["persona_centroid_distance"], embedder=TableEmbedder(table3))
    assert one(df3, "persona_centroid_distance") == pytest.approx(1 - np.sqrt(0.5))
    assert values(df, "persona_centroid_distance", system="solo") == []
    assert df.attrs["notes"]["persona_centroid_distance: dialogue with fewer than two agents"] == 1


def test_separability_synthetic_distinct_vs_collapsed():
    rng = np.random.default_rng(0)
    labels, keys, distinct, collapsed = [], [], [], []
    axes = np.eye(16)[:3]
    for d in range(10):
        for a in range(3):
            for _ in range(4):
                labels.append(f"agent{a}")
                keys.append(f"d{d}")
                v = axes[a] * 3 + rng.normal(size=16) * 0.3
                distinct.append(v / np.linalg.norm(v))
                w = rng.normal(size=16)
                collapsed.append(w / np.linalg.norm(w))
    labels_a = np.array(labels, dtype=object)
    assert separability(np.array(distinct), labels_a, keys) == 1.0
    acc = separability(np.array(collapsed), labels_a, keys)
    assert acc < 0.5  # chance is 1/3
    # identical vectors for every agent: ties go to the first speaker -> exactly 1/3
    same = np.tile(axes[0], (len(labels), 1))
    assert separability(same, labels_a, keys) == pytest.approx(1 / 3)
    # needs two speakers and two dialogues
    assert separability(np.array(distinct[:4]), labels_a[:4], keys[:4]) is None


def test_separability_folds_by_hand():
    # 2 dialogues -> 2 folds; fold of d0 is trained on d1 only and vice versa
    x = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], dtype=float)
    labels = np.array(["A", "B", "A", "B"], dtype=object)
    keys = ["d0", "d0", "d1", "d1"]
    # fold d0: centroids from d1: A=(1,0), B=(1,0) -> ties -> A: turn0 (A) right, turn1 (B) wrong
    # fold d1: centroids from d0: A=(1,0), B=(0,1) -> turn2 (A) right, turn3 (B)=(1,0) -> A wrong
    assert separability(x, labels, keys) == pytest.approx(0.5)


def _persona_dialogues(distinct: bool, n: int = 6) -> list:
    topics = {
        "Anchor": [
            "It makes sense that you feel hurt; your feelings are valid and you are safe here.",
            "I hear how heavy this is for you, and it is okay to feel sad about it.",
            "That sounds so lonely; it makes sense that your heart aches tonight.",
        ],
        "Catalyst": [
            "Let's make a plan: list three options, pick one, and start tomorrow at 9am.",
            "What is one concrete step you could take this week to fix the schedule?",
            "Try breaking the project into tasks with deadlines and track them in a spreadsheet.",
        ],
        "Beacon": [
            "Look how far you have come; you are stronger than you think and brighter days are ahead!",
            "You've got this! Every setback is a setup for a comeback, keep shining.",
            "I believe in you so much; your courage inspires everyone around you.",
        ],
    }
    generic = [
        "I understand, that must be difficult for you.",
        "That sounds difficult, I understand how you feel.",
        "I understand how difficult that must be.",
    ]
    out = []
    for i in range(n):
        rounds = []
        for r in range(3):
            k = (i + r) % 3
            replies = [(a, topics[a][k] if distinct else generic[(k + j) % 3]) for j, a in enumerate(AGENTS)]
            rounds.append((f"My problem number {i} is bothering me.", replies))
        out.append(dialogue(rounds, system="distinct" if distinct else "collapsed", ctx=f"c{i}"))
    return out


@pytest.mark.slow
def test_persona_metrics_with_real_minilm(tmp_path, monkeypatch):
    """Distinct personas are separable and far apart; collapsed ones are at chance and close; each
    turn is closer to its own card than the others' on average for the distinct system."""
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    df = compute(
        _persona_dialogues(True) + _persona_dialogues(False),
        [
            "persona_separability",
            "persona_centroid_distance",
            "persona_centroid_distance_corpus",
            "persona_similarity",
            "persona_card_margin",
        ],
    )
    sep = {s: one(df, "persona_separability", system=s) for s in ("distinct", "collapsed")}
    assert sep["distinct"] >= 0.9
    assert sep["collapsed"] <= 0.5
    dist = df[df["metric"] == "persona_centroid_distance"].groupby("system")["value"].mean()
    assert dist["distinct"] > dist["collapsed"] + 0.2
    assert one(df, "persona_centroid_distance_corpus", system="distinct") > 0.3
    margin = df[(df["metric"] == "persona_card_margin") & (df["system"] == "distinct")]["value"].mean()
    assert margin > 0
    sims = values(df, "persona_similarity")
    assert len(sims) == 2 * 6 * 3 * 3 and all(-1 <= v <= 1 for v in sims)


def test_persona_similarity_uses_the_speakers_card():
    _, cards = get_group("emotional")
    card = {c.name: c.prompt_block() for c in cards}
    emb = TableEmbedder()
    # Anchor says exactly Anchor's card text -> similarity 1 and margin 1 - max(the other cards played)
    d = dialogue([("hi", [("Anchor", card["Anchor"]), ("Catalyst", "a question"), ("Beacon", "something else")])])
    df = compute([d], ["persona_similarity", "persona_card_margin"], embedder=emb)
    assert one(df, "persona_similarity", agent="Anchor") == pytest.approx(1.0, abs=1e-6)
    vec = emb([card[n] for n in ("Anchor", "Catalyst", "Beacon")]).astype(float)
    assert one(df, "persona_card_margin", agent="Anchor") == pytest.approx(1 - max(vec[0] @ vec[1], vec[0] @ vec[2]), abs=1e-6)
    # the cards are the ones the transcript says were played, not today's files
    played = d.model_copy(deep=True)
    played.personas["Anchor"].prompt = "an edited card text"
    df3 = compute([played], ["persona_similarity"], embedder=emb)
    assert one(df3, "persona_similarity", agent="Anchor") < 0.999
    # a persona group without cards: no rows, a note
    d2 = dialogue([("hi", [("Anchor", "x")])], group="no-such-group")
    df2 = compute([d2], ["persona_similarity"], embedder=TableEmbedder())
    assert df2.empty
    assert df2.attrs["notes"] == {"persona_similarity: speaker without a persona card": 1}


def test_card_texts_are_embedded_with_the_turns_in_one_pass():
    emb = TableEmbedder()
    d = dialogue([("hi", [("Anchor", "a"), ("Beacon", "b")])])
    ctx = MetricContext([d], embedder=emb)
    _ = ctx.vectors
    assert len(emb.calls) == 1
    assert {"hi", "a", "b"} <= set(emb.calls[0]) and len(emb.calls[0]) == 3 + 2  # the 2 cards the agents played
