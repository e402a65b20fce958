"""`mascot-eval regress` as a gate that can fail: three verdicts from confidence bounds, exit codes
0/1/3/2, stated power, on constructed runs whose scripted judges have known score distributions."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.cli_helpers import run_cli
from tests.gatefactory import _rng, jittered
from tests.runfactory import build_run, noisy_scores

Q = (0.08, 0.08)  # the baseline's jitter: one point down / up with these probabilities per item


def _gate(args, capsys):
    code, out, err = run_cli(["regress", *args], capsys)
    return code, out + err


def _row(out: str, measure: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("in_domain") and f" {measure} " in f" {line} ")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """n = 200 contexts: a baseline, a candidate with a true 5-point drop, one with no change."""
    tmp = tmp_path_factory.mktemp("big")
    base = build_run(tmp / "base", systems=["mascot"], score=jittered(1, "base", p_down=Q[0], p_up=Q[1]), n_contexts=200)
    drop = build_run(tmp / "drop", systems=["mascot"], score=jittered(1, "drop", p_down=0.28, p_up=0.08), n_contexts=200)
    same = build_run(tmp / "same", systems=["mascot"], score=jittered(1, "same", p_down=Q[0], p_up=Q[1]), n_contexts=200)
    return base, drop, same


GATE2 = ["--metrics", "agent.overall,group.overall"]


def test_true_five_point_drop_at_n200_fails(big, capsys, tmp_path):
    base, drop, _ = big
    csv = tmp_path / "gate.csv"
    code, out = _gate(["--baseline", str(base.path), "--candidate", str(drop.path), *GATE2, "--out", str(csv)], capsys)
    assert code == 1, out
    assert out.splitlines()[0].startswith("power: every measure resolves its margin")
    assert "VERDICT: FAIL (exit 1)" in out
    t = pd.read_csv(csv).set_index("measure")
    for m in ("agent.overall", "group.overall"):
        r = t.loc[m]
        assert r["verdict"] == "FAIL" and r["n"] == 200 and r["change_hi"] < -2
        assert -7 < r["change"] < -3  # the scripted judge's true drop is 5 points
        assert r["mdd"] <= 2 and r["alpha_each"] == pytest.approx(0.025)


def test_no_change_at_n200_passes(big, capsys):
    base, _, same = big
    code, out = _gate(["--baseline", str(base.path), "--candidate", str(same.path), *GATE2], capsys)
    assert code == 0, out
    assert "VERDICT: PASS (exit 0)" in out
    assert all(_row(out, m).split()[-1] == "PASS" for m in ("agent.overall", "group.overall"))


def test_all_measures_by_default_and_underpowered_first_line(big, capsys):
    """Every criterion at margin 2 and n = 200: single group criteria cannot resolve 2 points; the first
    line says so, and the real drop still FAILs the gate."""
    base, drop, _ = big
    code, out = _gate(["--baseline", str(base.path), "--candidate", str(drop.path)], capsys)
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith("UNDERPOWERED:") and "group.fidelity" in out and "of 11 measure(s)" in first
    assert "Bonferroni over 11 measure(s)" in out
    assert _row(out, "agent.overall").split()[-1] == "FAIL"


def _issue_judge(bad_p: float):
    """The issue's n=8 case: a scripted judge scoring baseline replies mostly 4, and a candidate's
    replies 2 instead of 4 (per agent reply, and per group criterion) with probability bad_p."""

    def score(system, ctx, level, agent, crit):
        base = 4.0 if _rng("n8", ctx, level, agent, crit).random() < 0.8 else 3.0
        if bad_p and _rng("n8bad", ctx, level, agent if level == "agent" else crit).random() < bad_p:
            return 2.0
        return base

    return score


def test_issue_n8_case_fails(tmp_path, capsys):
    base = build_run(tmp_path / "base", systems=["mascot"], score=_issue_judge(0.0), n_contexts=8)
    cand = build_run(tmp_path / "cand", systems=["mascot"], score=_issue_judge(0.65), n_contexts=8)
    csv = tmp_path / "gate.csv"
    code, out = _gate(["--baseline", str(base.path), "--candidate", str(cand.path), "--out", str(csv)], capsys)
    assert code == 1, out  # today's gate printed PASS, exit 0
    assert out.splitlines()[0].startswith("UNDERPOWERED:")  # 8 contexts cannot resolve a 2-point margin
    t = pd.read_csv(csv).set_index("measure")
    assert t["change"].max() < -15 and t.loc["agent.overall", "change"] < -20  # the issue's 22-31 point drops
    assert "FAIL" in set(t["verdict"]) and "PASS" not in set(t["verdict"])
    a = t.loc["agent.overall"]
    with capsys.disabled():
        print(
            f"\nn=8 case: agent.overall change {a['change']:+.1f} [{a['change_lo']:+.1f}, {a['change_hi']:+.1f}], verdicts { {k: int(v) for k, v in t['verdict'].value_counts().items()} }"
        )
    code, out = _gate(["--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "agent.overall"], capsys)
    assert code == 1 and _row(out, "agent.overall").split()[-1] == "FAIL", out


def test_twelve_point_drop_at_n3_is_inconclusive_never_pass(tmp_path, capsys):
    """Replaces the old test that passed a 12.5-point drop at n=3 (an exact Wilcoxon cannot reach p < 0.05)."""
    base = build_run(tmp_path / "b3", systems=["mascot"], score=noisy_scores({"mascot": 0.5}, seed=2), n_contexts=3)
    cand = build_run(tmp_path / "c3", systems=["mascot"], score=noisy_scores({"mascot": 0.0}, seed=2), n_contexts=3)
    args = ["--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "agent.overall"]
    code, out = _gate(args, capsys)
    assert code == 3, out
    row = _row(out, "agent.overall")
    assert "-12.5" in row and "INCONCLUSIVE" in row and "PASS" not in row
    assert "at least 5 are needed" in out and "VERDICT: INCONCLUSIVE (exit 3)" in out
    assert row.split()[-1] == "5"  # the contexts that would decide it
    assert _gate(args + ["--inconclusive", "fail"], capsys)[0] == 1
    code, out = _gate(args + ["--inconclusive", "pass"], capsys)
    assert code == 0 and "counted as a pass (--inconclusive pass)" in out


def test_fail_on_point(tmp_path, capsys):
    """A point drop beyond the margin whose bound straddles it: INCONCLUSIVE by default, FAIL with --fail-on point."""
    base = build_run(tmp_path / "b", systems=["mascot"], score=jittered(3, "b", p_down=0.2, p_up=0.2), n_contexts=12)
    cand = build_run(tmp_path / "c", systems=["mascot"], score=jittered(3, "c", p_down=0.3, p_up=0.15), n_contexts=12)
    args = ["--baseline", str(base.path), "--candidate", str(cand.path), "--metrics", "group.overall", "--margin", "1"]
    code, out = _gate(args, capsys)
    change = float(_row(out, "group.overall").split()[4])
    assert change < -1 and code == 3, out
    code, out = _gate(args + ["--fail-on", "point"], capsys)
    assert code == 1 and "--fail-on point" in out


def test_csv_baseline_is_unpaired_and_carries_the_baselines_error(big, tmp_path, capsys):
    base, drop, same = big
    csv = tmp_path / "lb.csv"
    code, _, _ = run_cli(["leaderboard", str(base.path), "--out", str(csv), "--n-boot", "500"], capsys)
    assert code == 0
    code, out = _gate(["--baseline", str(csv), "--candidate", str(drop.path), *GATE2], capsys)
    assert code == 1, out
    assert "unpaired" in out and "sampling error is taken from its 95% interval" in out
    code, out = _gate(["--baseline", str(csv), "--candidate", str(same.path), "--metrics", "agent.overall"], capsys)
    assert code == 0, out
    # the unpaired bound is wider than the paired one on the same runs
    paired = _row(
        _gate(["--baseline", str(base.path), "--candidate", str(same.path), "--metrics", "agent.overall"], capsys)[1],
        "agent.overall",
    )
    width = lambda row: float(row.split("]")[0].split(",")[1]) - float(row.split("[")[1].split(",")[0])  # noqa: E731
    assert width(_row(out, "agent.overall")) > 1.5 * width(paired)
    stripped = tmp_path / "nointerval.csv"
    lb = pd.read_csv(csv)
    lb.drop(columns=["agent.overall.lo"]).to_csv(stripped, index=False)
    code, out = _gate(["--baseline", str(stripped), "--candidate", str(same.path), "--metrics", "agent.overall"], capsys)
    assert code == 2 and "no interval" in out and "Traceback" not in out
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    code, out = _gate(["--baseline", str(bad), "--candidate", str(same.path)], capsys)
    assert code == 2 and "columns" in out
