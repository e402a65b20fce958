"""summary.json on constructed run directories: units, clusters, overall, unscored rows, comparisons."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mascot_eval.runs.summary import summarize
from mascot_eval.runs.tables import judgment_units, load_runs
from mascot_eval.stats.compare import compare_systems
from tests.runfactory import build_run, judgment_rows, make_transcript, noisy_scores


def test_judgment_units_hand_computed():
    t = make_transcript("ed-positive", 0, "mascot")

    def s1(system, ctx, level, agent, crit):
        return 5.0 if level == "agent" else 3.0

    def s2(system, ctx, level, agent, crit):
        if agent == "Beacon" and crit == "empathy":
            return None  # unscored: Beacon gets no agent.overall from this judge
        return 3.0

    rows = judgment_rows(t, "gpt", s1, 0) + judgment_rows(t, "claude", s2, 0)
    units, unscored = judgment_units(rows, run_id="r")
    allj = units[units["judge"] == "all"]
    emp = allj[allj["measure"] == "agent.empathy"].set_index("agent")["value"]
    assert emp["Anchor"] == pytest.approx(75.0)  # mean of 100 and 50
    assert emp["Beacon"] == pytest.approx(100.0)  # only gpt scored it
    ov = allj[allj["measure"] == "agent.overall"].set_index("agent")["value"]
    assert ov["Anchor"] == pytest.approx(75.0)
    claude_ov = units[(units["judge"] == "claude") & (units["measure"] == "agent.overall")]
    assert set(claude_ov["agent"]) == {"Anchor", "Catalyst"}  # Beacon incomplete for claude
    g = allj[allj["measure"] == "group.overall"]["value"]
    assert list(g) == [pytest.approx(50.0)]
    assert unscored == {"claude": {"no score in reply": 1}}
    assert set(units["cluster"]) == {"ed-positive:c000"}


def test_summary_detects_better_system_and_is_reproducible(tmp_path):
    rd = build_run(
        tmp_path / "run-a",
        systems=["mascot", "zero-shot"],
        score=noisy_scores({"mascot": 0.6, "zero-shot": 0.0}),
        n_contexts=14,
        metric_value=lambda s, i: 0.2 if s == "mascot" else 0.35,
    )
    s = summarize(rd, n_boot=500)
    assert json.loads(rd.summary_path.read_text())["schema"] == "mascot-summary/2"
    est = pd.DataFrame(s["estimates"])
    row = est[(est["label"] == "mascot") & (est["measure"] == "agent.overall") & (est["judge"] == "all")].iloc[0]
    assert row["n"] == 14 and row["n_obs"] == 42 and row["lo"] <= row["mean"] <= row["hi"]
    comps = pd.DataFrame(s["comparisons"])
    assert s["reference"] == "mascot" and set(comps["a"]) == {"mascot"}
    ov = comps[comps["measure"] == "agent.overall"].iloc[0]
    assert ov["n_pairs"] == 14 and ov["mean_diff"] > 10 and ov["p_holm"] < 0.05 and ov["rank_biserial"] > 0.9
    assert ov["diff_lo"] > 0
    red = comps[comps["measure"] == "metric.inter_agent_selfbleu"].iloc[0]
    assert red["mean_diff"] == pytest.approx(-0.15)
    assert s["corpus_metrics"][0]["metric"] == "distinct_2"
    again = summarize(rd, n_boot=500)
    assert again["estimates"] == s["estimates"] and again["comparisons"] == s["comparisons"]


def test_no_difference_is_not_significant(tmp_path):
    rd = build_run(
        tmp_path / "run-b",
        systems=["mascot", "few-shot"],
        score=noisy_scores({"mascot": 0.0, "few-shot": 0.0}, noise=0.5),
        n_contexts=12,
    )
    data = load_runs([rd])
    comps = compare_systems(data.units, reference="mascot", n_boot=300)
    assert (comps["p_holm"] > 0.05).all()
    assert ((comps["p_holm"] >= comps["p"]) | np.isclose(comps["p_holm"], comps["p"])).all()


def test_two_runs_of_one_system_get_distinct_labels(tmp_path):
    a = build_run(tmp_path / "base", systems=["mascot"], score=noisy_scores({"mascot": 0.0}), n_contexts=6)
    b = build_run(tmp_path / "ckpt", systems=["mascot"], score=noisy_scores({"mascot": 0.5}), n_contexts=6)
    data = load_runs([a, b])
    assert set(data.units["label"]) == {"mascot@base", "mascot@ckpt"}
    comps = compare_systems(data.units, n_boot=200)
    assert set(comps["n_pairs"]) == {6}
