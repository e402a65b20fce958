"""`mascot-eval regress`: exit 1 on a real drop, 0 on noise within tolerance, 2 on incompatible inputs."""

from __future__ import annotations

import pytest

from tests.runfactory import build_run, noisy_scores
from tests.cli_helpers import run_cli


@pytest.fixture
def baseline(tmp_path):
    return build_run(tmp_path / "base", systems=["mascot"], score=noisy_scores({"mascot": 0.5}, seed=1), n_contexts=20)


def test_real_drop_fails(tmp_path, baseline, capsys):
    cand = build_run(tmp_path / "cand", systems=["mascot"], score=noisy_scores({"mascot": -0.2}, seed=1), n_contexts=20)
    code, out = run_cli(["regress", "--baseline", str(baseline.path), "--candidate", str(cand.path)], capsys).code_and_output
    assert code == 1, out
    assert "FAIL" in out and "agent.overall" in out and "REGRESSION" in out


def test_noise_within_tolerance_passes(tmp_path, baseline, capsys):
    # same systematic level, different per-item noise (another seed for the system-specific part)
    score = noisy_scores({"mascot": 0.5}, seed=1)

    def jitter(system, ctx, level, agent, crit):
        s = score(system, ctx, level, agent, crit)
        flip = (ctx + len(crit) + len(agent or "")) % 5
        return min(5.0, s + 0.5) if flip == 0 else (max(1.0, s - 0.5) if flip == 1 else s)

    cand = build_run(tmp_path / "cand", systems=["mascot"], score=jitter, n_contexts=20)
    code, out = run_cli(["regress", "--baseline", str(baseline.path), "--candidate", str(cand.path), "--tolerance", "2.0"], capsys).code_and_output
    assert code == 0, out
    assert "PASS" in out and "agent.consistency" in out


def test_small_sample_drop_is_not_significant(tmp_path, capsys):
    base = build_run(tmp_path / "b3", systems=["mascot"], score=noisy_scores({"mascot": 0.5}, seed=2), n_contexts=3)
    cand = build_run(tmp_path / "c3", systems=["mascot"], score=noisy_scores({"mascot": 0.0}, seed=2), n_contexts=3)
    code, out = run_cli(["regress", "--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "agent.overall"], capsys).code_and_output
    assert code == 0, out  # n=3 pairs: exact Wilcoxon p >= 0.25 can never be significant
    assert "drop (not significant)" in out


def test_incompatible_tasks_exit_2(tmp_path, baseline, capsys):
    other = build_run(tmp_path / "other", systems=["mascot"], score=noisy_scores({"mascot": 0.5}), n_contexts=20, task="ed-negative")
    code, out = run_cli(["regress", "--baseline", str(baseline.path), "--candidate", str(other.path)], capsys).code_and_output
    assert code == 2 and "differ from candidate tasks" in out and "Traceback" not in out


def test_missing_criterion_exit_2(tmp_path, baseline, capsys):
    cand = build_run(tmp_path / "cand", systems=["mascot"], score=noisy_scores({"mascot": 0.5}), n_contexts=20)
    code, out = run_cli(["regress", "--baseline", str(baseline.path), "--candidate", str(cand.path), "--metrics", "agent.charisma"], capsys).code_and_output
    assert code == 2 and "agent.charisma" in out


def test_csv_baseline(tmp_path, baseline, capsys):
    csv = tmp_path / "lb.csv"
    code, _ = run_cli(["leaderboard", str(baseline.path), "--out", str(csv), "--n-boot", "200"], capsys).code_and_output
    assert code == 0 and csv.exists()
    drop = build_run(tmp_path / "cand", systems=["mascot"], score=noisy_scores({"mascot": -0.3}, seed=1), n_contexts=20)
    code, out = run_cli(["regress", "--baseline", str(csv), "--candidate", str(drop.path), "--metrics", "agent.overall,group.overall"], capsys).code_and_output
    assert code == 1 and "one-sample" in out
    same = build_run(tmp_path / "same", systems=["mascot"], score=noisy_scores({"mascot": 0.5}, seed=1), n_contexts=20)
    code, out = run_cli(["regress", "--baseline", str(csv), "--candidate", str(same.path)], capsys).code_and_output
    assert code == 0, out
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    code, out = run_cli(["regress", "--baseline", str(bad), "--candidate", str(same.path)], capsys).code_and_output
    assert code == 2 and "columns" in out
