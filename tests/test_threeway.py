"""Three-way comparisons: permutation bookkeeping, position bias, Bradley-Terry, resume."""

from __future__ import annotations

import asyncio
import math
import re

import pytest

from mascot_eval.errors import UserError
from mascot_eval.judges.threeway import (
    bradley_terry,
    compare_async,
    map_back,
    orders,
    shared_trios,
    summarize_comparisons,
)
from mascot_eval.runs.rundir import RunDir
from tests.judge_helpers import transcript

SYSTEMS = ["mascot", "multiagentesc", "zeroshot"]


def _transcripts(n_ctx=4):
    return [transcript(system=s, context_id=f"c{i}", agent_text=f"[{s}] reply for c{i}") for s in SYSTEMS for i in range(n_ctx)]


def _shown_systems(prompt: str) -> list[str]:
    """Which system sits at A, B, C in a rendered three-way prompt (from the marker in the text)."""
    return [m for m in re.findall(r"\[(\w+)\] reply for", prompt)][::3]


def _run(fake_model, tmp_path, responder, *, mode="all", n_ctx=4, name="cmp"):
    spec = fake_model(name, responder)
    out = RunDir(tmp_path / name, create=True)
    res = asyncio.run(compare_async(_transcripts(n_ctx), [spec], out, order_mode=mode, progress=False))
    return res, list(out.comparisons()), out, spec


def test_orders():
    assert len(orders("all")) == 6 and len(set(orders("all"))) == 6
    rot = orders("rotations")
    assert len(rot) == 3 and all(sorted(p[i] for p in rot) == [0, 1, 2] for i in range(3))
    with pytest.raises(UserError):
        orders("random")


def test_map_back():
    m = map_back(["x", "y", "z"], "B", ["B", "C", "A"])
    assert m["best_system"] == "y" and m["best_position"] == 2 and m["ranking_systems"] == ["y", "z", "x"]
    assert map_back(["x", "y", "z"], "tie", None)["best_system"] is None


def test_always_first_is_pure_position_bias(fake_model, tmp_path, tmp_cache):
    res, rows, _, spec = _run(fake_model, tmp_path, lambda req: '{"rationale": "first", "best": "A"}')
    assert res.new == 4 * 6 and res.unscored == 0
    s = summarize_comparisons(rows, n_boot=200)
    j = s["judges"][spec]
    assert j["first_position_rate"]["mean"] == 1.0
    assert j["position_rates"]["2"]["mean"] == 0.0
    for sys_ in SYSTEMS:  # each system sits first in 2 of 6 orders: no preference survives
        assert j["systems"][sys_]["win"]["mean"] == pytest.approx(1 / 3)
        assert j["bradley_terry"]["systems"][sys_]["strength"] == pytest.approx(0.0, abs=1e-6)
    assert j["order_disagreement"]["mean"] == 1.0
    assert j["context_verdicts"] == {"no majority": 4}


def test_consistent_preference_is_mapped_back(fake_model, tmp_path, tmp_cache):
    def prefers_mascot(req):
        shown = _shown_systems(req.messages[-1]["content"])
        lab = "ABC"[shown.index("mascot")]
        rest = [x for x in "ABC" if x != lab]
        return f'{{"rationale": "r", "best": "{lab}", "ranking": ["{lab}", "{rest[0]}", "{rest[1]}"]}}'

    res, rows, _, spec = _run(fake_model, tmp_path, prefers_mascot, mode="rotations", name="cmp-pref")
    assert res.new == 4 * 3
    assert all(r["best_system"] == "mascot" for r in rows)
    s = summarize_comparisons(rows, n_boot=200)["judges"][spec]
    assert s["systems"]["mascot"]["win"]["mean"] == 1.0 and s["systems"]["zeroshot"]["loss"]["mean"] == 1.0
    assert s["first_position_rate"]["mean"] == pytest.approx(1 / 3)
    assert s["order_disagreement"]["mean"] == 0.0 and s["context_verdicts"] == {"mascot": 4}
    bt = s["bradley_terry"]["systems"]
    assert bt["mascot"]["rank"] == 1 and bt["mascot"]["strength"] > 0


def test_unparseable_verdicts_are_counted(fake_model, tmp_path, tmp_cache):
    res, rows, out, spec = _run(fake_model, tmp_path, lambda req: "Conversation B is best.", mode="rotations", name="cmp-bad")
    assert res.unscored == 12 and all(r["status"] == "unscored" and r["best_system"] is None for r in rows)
    s = summarize_comparisons(rows, n_boot=50)
    assert s["pooled"]["unscored_rate"] == 1.0 and s["pooled"]["n_valid"] == 0
    # resume: nothing left to do
    res2 = asyncio.run(compare_async(_transcripts(), [spec], out, order_mode="rotations", progress=False))
    assert res2.new == 0 and res2.reused == 12


def test_shared_contexts_only_and_three_systems():
    ts = _transcripts(3)
    ts = [t for t in ts if not (t.system == "zeroshot" and t.context_id == "c0")]
    names, trios = shared_trios(ts)
    assert names == sorted(SYSTEMS) and [t[0].context_id for t in trios] == ["c1", "c2"]
    with pytest.raises(UserError, match="exactly 3 systems"):
        shared_trios([t for t in ts if t.system != "zeroshot"])


def test_bradley_terry_hand_checked():
    # two systems, A beats B 3 times and loses once: p_A / p_B = 3 -> log-strengths +-ln(3)/2
    bt = bradley_terry([("A", "B", 1.0)] * 3 + [("B", "A", 1.0)], ["A", "B"])
    assert bt["A"] == pytest.approx(math.log(3) / 2, abs=1e-6) and bt["B"] == pytest.approx(-math.log(3) / 2, abs=1e-6)
    # ties count half: A beats B twice, two ties -> A has 3 of 4 -> the same fit
    bt2 = bradley_terry([("A", "B", 1.0)] * 2 + [("A", "B", 0.5)] * 2, ["A", "B"])
    assert bt2["A"] == pytest.approx(bt["A"], abs=1e-6)
    # a cycle A>B>C>A: everyone equal
    cyc = bradley_terry([("A", "B", 1.0), ("B", "C", 1.0), ("C", "A", 1.0)], ["A", "B", "C"])
    assert all(abs(v) < 1e-6 for v in cyc.values())
    # three systems: the MLE satisfies the score equations W_i = sum_j n_ij p_i / (p_i + p_j)
    outs = (
        [("A", "B", 1.0)] * 4
        + [("B", "A", 1.0)] * 2
        + [("B", "C", 1.0)] * 3
        + [("C", "B", 1.0)]
        + [("A", "C", 1.0)] * 2
        + [("C", "A", 1.0)]
    )
    fit = bradley_terry(outs, ["A", "B", "C"])
    p = {k: math.exp(v) for k, v in fit.items()}
    wins = {"A": 6, "B": 5, "C": 2}
    for i in "ABC":
        expected = sum(sum(1 for a, b, _ in outs if {a, b} == {i, j}) * p[i] / (p[i] + p[j]) for j in "ABC" if j != i)
        assert expected == pytest.approx(wins[i], abs=1e-6)
    # a system that never wins stays finite with the prior
    assert math.isfinite(bradley_terry([("A", "B", 1.0)] * 3, ["A", "B"], prior=0.5)["B"])
