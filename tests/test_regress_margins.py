"""Per-measure margins and directions: judge measures in 0-100 points (--margin), metrics with their own
direction and margin in their units; a real but small drop passes a wide margin and fails a tight one."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.cli_helpers import run_cli
from tests.runfactory import build_run, noisy_scores

BASE = noisy_scores({"mascot": 0.5}, seed=4)


def _gate(args, capsys):
    code, out, err = run_cli(["regress", *args], capsys)
    return code, out + err


def small_drop(system, ctx, level, agent, crit):
    """Every dialogue loses half a point on one of its 15 agent items: agent.overall -0.83 per dialogue."""
    s = BASE(system, ctx, level, agent, crit)
    return max(1.0, s - 0.5) if (agent, crit) == ("Anchor", "emotion") else s


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("margins")
    metric = {"base": lambda s, i: 0.20 + 0.01 * (i % 4), "cand": lambda s, i: 0.26 + 0.01 * (i % 3)}
    base = build_run(tmp / "base", systems=["mascot"], score=BASE, n_contexts=14, metric_value=metric["base"])
    cand = build_run(tmp / "cand", systems=["mascot"], score=small_drop, n_contexts=14, metric_value=metric["cand"])
    return base, cand


def test_small_drop_passes_a_wide_margin_and_fails_a_tight_one(runs, capsys, tmp_path):
    base, cand = runs
    args = ["--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "agent.overall"]
    code, out = _gate(args + ["--margin", "2.0"], capsys)
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.startswith("in_domain") and "agent.overall" in line)
    assert "-0.8" in row and row.split()[-1] == "PASS"
    csv = tmp_path / "table.csv"
    code, out = _gate(args + ["--margin", "0.5", "--out", str(csv)], capsys)
    assert code == 1 and "VERDICT: FAIL" in out
    r = pd.read_csv(csv).set_index("measure").loc["agent.overall"]
    assert r["verdict"] == "FAIL" and r["n"] == 14 and r["change_hi"] < -0.5 and r["margin"] == 0.5
    assert r["change"] == pytest.approx(-12.5 / 15, abs=0.1)
    # the per-measure margin wins over --margin; --tolerance is the old name of --margin
    assert _gate(args[:-1] + ["agent.overall=0.5", "--margin", "5"], capsys)[0] == 1
    assert _gate(args + ["--tolerance", "0.5"], capsys)[0] == 1


def test_lower_is_better_metric_with_its_own_margin(runs, capsys):
    base, cand = runs
    args = ["--baseline", str(base.path), "--candidate", str(cand.path)]
    code, out = _gate(args + ["--metrics", "metric.inter_agent_selfbleu:lower=0.02"], capsys)
    assert code == 1 and "lower=better" in out and "+0.02" in out  # redundancy rose by ~0.06
    code, out = _gate(args + ["--metrics", "metric.inter_agent_selfbleu:higher=0.02"], capsys)
    assert code == 0 and "PASS" in out  # read as higher-is-better it improved
    code, out = _gate(args + ["--metrics", "metric.inter_agent_selfbleu:lower=0.1"], capsys)
    assert code == 0, out  # a 0.06 rise within a 0.1 margin
    code, out = _gate(args + ["--metrics", "metric.inter_agent_selfbleu"], capsys)
    assert code == 2 and "say whether higher is better" in out and "Traceback" not in out
    code, out = _gate(args + ["--metrics", "metric.inter_agent_selfbleu:lower"], capsys)
    assert code == 2 and "give its margin in the metric's own units" in out
    code, out = _gate(args + ["--metrics", "agent.overall,metric.inter_agent_selfbleu:lower=0.02"], capsys)
    assert "Bonferroni over 2 measure(s)" in out and code == 1


def test_a_judge_and_a_metric_gate_together(runs, capsys):
    base, cand = runs
    code, out = _gate(
        [
            "--baseline",
            str(base.path),
            "--candidate",
            str(cand.path),
            "--metrics",
            "agent.overall=2,metric.persona_similarity:higher=0.05",
        ],
        capsys,
    )
    rows = [line for line in out.splitlines() if line.startswith("in_domain")]
    assert len(rows) == 2 and code == 0 and all(r.split()[-1] == "PASS" for r in rows), out
