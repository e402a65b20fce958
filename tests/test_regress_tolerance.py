"""`mascot-eval regress` beyond the three basic cases: a real but small drop passes within the
tolerance and fails under a tighter one; lower-is-better metrics; more unusable inputs (exit 2)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.runfactory import build_run, noisy_scores
from tests.cli_helpers import run_cli

BASE = noisy_scores({"mascot": 0.5}, seed=4)


def small_drop(system, ctx, level, agent, crit):
    """Every dialogue loses half a point on one of its 15 agent items: agent.overall -0.83 per dialogue."""
    s = BASE(system, ctx, level, agent, crit)
    return max(1.0, s - 0.5) if (agent, crit) == ("Anchor", "emotion") else s


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regress")
    metric = {"base": lambda s, i: 0.20 + 0.01 * (i % 4), "cand": lambda s, i: 0.26 + 0.01 * (i % 3)}
    base = build_run(tmp / "base", systems=["mascot"], score=BASE, n_contexts=14, metric_value=metric["base"])
    cand = build_run(tmp / "cand", systems=["mascot"], score=small_drop, n_contexts=14, metric_value=metric["cand"])
    return base, cand


def test_real_drop_within_tolerance_passes_and_fails_when_tighter(runs, capsys, tmp_path):
    base, cand = runs
    args = ["regress", "--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "agent.overall"]
    code, out = run_cli(args + ["--tolerance", "2.0"], capsys).code_and_output
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.startswith("in_domain") and "agent.overall" in line)
    assert "-0.8" in row and row.rstrip().endswith("ok") and "PASS" in out
    csv = tmp_path / "table.csv"
    code, out = run_cli(args + ["--tolerance", "0.5", "--out", str(csv)], capsys).code_and_output
    assert code == 1 and "REGRESSION" in out and "agent.overall" in out
    t = pd.read_csv(csv)
    r = t[t["measure"] == "agent.overall"].iloc[0]
    assert r["verdict"] == "FAIL" and r["n"] == 14 and r["p_holm"] < 0.01
    assert r["change"] == pytest.approx(-12.5 / 15, abs=0.1) and r["change_hi"] < 0


def test_lower_is_better_metric(runs, capsys):
    base, cand = runs
    args = ["regress", "--baseline", str(base.path), "--candidate", str(cand.path)]
    code, out = run_cli(args + ["--metrics", "metric.inter_agent_selfbleu:lower=0.02"], capsys).code_and_output
    assert code == 1 and "lower=better" in out and "REGRESSION" in out  # redundancy rose by ~0.06
    code, out = run_cli(args + ["--metrics", "metric.inter_agent_selfbleu:higher=0.02"], capsys).code_and_output
    assert code == 0 and "improved" in out
    code, out = run_cli(args + ["--metrics", "metric.inter_agent_selfbleu"], capsys).code_and_output
    assert code == 2 and "say whether higher is better" in out and "Traceback" not in out


def test_no_shared_contexts_and_ambiguous_system_exit_2(runs, tmp_path, capsys):
    base, _ = runs
    moved = build_run(tmp_path / "moved", systems=["mascot"], score=BASE, n_contexts=6)
    for f in (moved.transcripts_path, moved.judgments_path):  # same task, other contexts
        f.write_text(f.read_text().replace(":c0", ":d0").replace('"c0', '"d0'))
    code, out = run_cli(["regress", "--baseline", str(base.path), "--candidate", str(moved.path)], capsys).code_and_output
    assert code == 2 and "share no contexts" in out
    two = build_run(tmp_path / "two", systems=["mascot", "zero-shot"], score=noisy_scores({"mascot": 0.5, "zero-shot": 0.0}),
                    n_contexts=4)
    code, out = run_cli(["regress", "--baseline", str(base.path), "--candidate", str(two.path)], capsys).code_and_output
    assert code == 2 and "several systems" in out
    code, out = run_cli(["regress", "--baseline", str(base.path), "--candidate", str(two.path), "--system", "zero-shot"], capsys).code_and_output
    # zero-shot (12.5 points lower) against the baseline's single system: 4 pairs can never reach p < 0.05
    assert code == 0 and "drop (not significant)" in out
