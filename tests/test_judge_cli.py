"""The judge, agreement, compare and human CLIs end to end on the fake backend."""

from __future__ import annotations

import csv
import json

import pytest

from mascot_eval.judges.human import COLUMNS
from mascot_eval.runs.rundir import RunDir
from tests.cli_helpers import run_cli as _cli
from tests.judge_helpers import criteria_in, scores_json, transcript


def _judge_a(req):
    p = req.messages[-1]["content"]
    crit = criteria_in(p) if '{"rationale"' in p else []
    return scores_json(crit, 2 + len(p) % 3) if crit else "??"


def _judge_b(req):
    p = req.messages[-1]["content"]
    crit = criteria_in(p) if '{"rationale"' in p else []
    return scores_json(crit, 2 + len(p) % 3 + (len(p) % 7 == 0)) if crit else "??"


@pytest.fixture
def run3(tmp_path):
    rd = RunDir(tmp_path / "run", create=True)
    for s in ("mascot", "esc", "zeroshot"):
        for i in range(5):
            rd.append_transcript(transcript(system=s, context_id=f"c{i}", agent_text=f"{s} says" + " so" * (i * 3 + len(s))))
    return rd


def test_judge_and_agreement_cli(run3, fake_model, tmp_cache, capsys):
    a = fake_model("cli-a", _judge_a)
    b = fake_model("cli-b", _judge_b)
    code, out, err = _cli(["judge", str(run3.path), "--judges", f"{a},{b}", "--no-progress"], capsys)
    assert code == 0, err
    assert "120 new calls (0 unscored)" in out and "Overall (0-100" in out and "parse_failures=0" in out
    code, out, _ = _cli(["judge", str(run3.path), "--judges", f"{a},{b}", "--no-progress"], capsys)
    assert "0 new calls" in out and "120 reused" in out
    code, out, err = _cli(["agreement", str(run3.path), "--n-boot", "100"], capsys)
    assert code == 0, err
    assert "alpha_ordinal" in out and "spearman fake/cli-a~fake/cli-b" in out and "parse_failure_rate" in out
    assert (run3.path / "agreement.csv").exists() and (run3.path / "judge_diagnostics.csv").exists()


def test_agreement_counts_the_judges_that_scored(run3, fake_model, tmp_cache, capsys):
    """Two judges in judgments.jsonl but only one scored anything: say so, not "found 2 judge(s)"."""
    a = fake_model("cli-ok", _judge_a)
    bad = fake_model("cli-never", lambda req: "I cannot score this.")
    code, _, err = _cli(["judge", str(run3.path), "--judges", f"{a},{bad}", "--levels", "group", "--no-progress"], capsys)
    assert code == 0, err
    code, out, err = _cli(["agreement", str(run3.path), "--n-boot", "100"], capsys)
    assert code == 0, err
    assert "found 2 judge(s)" not in out
    assert "1 of 2 judges scored any item" in out and "fake/cli-never: 0 of 60 score rows scored" in out


def test_alpha_lines_for_the_run_table(run3, fake_model, tmp_cache, capsys):
    from mascot_eval.cli.agreement import alpha_lines

    a, b = fake_model("cli-a2", _judge_a), fake_model("cli-b2", _judge_b)
    code, _, err = _cli(["judge", str(run3.path), "--judges", f"{a},{b}", "--levels", "group", "--no-progress"], capsys)
    assert code == 0, err
    lines = alpha_lines(list(run3.judgments()), n_boot=100)
    assert lines[0].startswith("judge agreement (Krippendorff alpha, ordinal")
    assert any(ln.strip().startswith("group overall") and "n=15" in ln for ln in lines)
    one = alpha_lines([r for r in run3.judgments() if r["judge"] == a], n_boot=100)
    assert one == ["judge agreement: needs two judges scoring the same items; 1 of 1 judge scored any item"]


def test_compare_cli(tmp_path, fake_model, tmp_cache, capsys):
    dirs = []
    for s in ("mascot", "esc", "zeroshot"):
        rd = RunDir(tmp_path / s, create=True)
        for i in range(3):
            rd.append_transcript(transcript(system=s, context_id=f"c{i}"))
        dirs.append(str(rd.path))
    j = fake_model("cli-cmp", lambda req: '{"rationale": "x", "best": "B"}')
    code, out, err = _cli(["compare", *dirs, "--judges", j, "--orders", "rotations", "--no-progress"], capsys)
    assert code == 0, err
    assert "9 new calls" in out and "first-position picks 0%" in out
    summary = json.loads((tmp_path / "mascot" / "comparisons_summary.json").read_text())
    assert summary["pooled"]["position_rates"]["2"]["mean"] == 1.0


def test_human_cli(run3, tmp_path, capsys):
    out_dir = tmp_path / "h"
    code, out, err = _cli(["human", "export", str(run3.path), "--out", str(out_dir), "--limit", "4"], capsys)
    assert code == 0, err and "16 items" in out
    files = []
    for k, ann in enumerate(("ann1", "ann2")):
        with open(out_dir / "sheet.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        for i, r in enumerate(rows):
            r["annotator"] = ann
            for c in COLUMNS[5:]:
                applies = (r["level"] == "agent") == (
                    c in ("emotion", "empathy", "consistency", "contribution")
                ) or c == "relevance"
                r[c] = str(1 + (i + k * (i % 2)) % 5) if applies else ""
        f = out_dir / f"{ann}.csv"
        with open(f, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
        files.append(str(f))
    code, out, err = _cli(["human", "import", *files], capsys)
    assert code == 0, err
    assert "from 2 annotator(s)" in out and "inter-annotator Krippendorff alpha" in out
    assert (out_dir / "human_ratings.jsonl").exists()


def test_user_errors_are_one_line(run3, capsys):
    code, _, err = _cli(["judge", str(run3.path), "--judges", "gtp", "--no-progress"], capsys)
    assert code == 2 and err.count("\n") == 1 and "did you mean 'gpt'" in err
    code, _, err = _cli(["agreement", str(run3.path)], capsys)
    assert code == 2 and "no judgments" in err
    code, _, err = _cli(["compare", str(run3.path), "--systems", "a,b", "--no-progress"], capsys)
    assert code == 2 and "exactly three" in err


def test_help(capsys):
    for cmd in (
        ["judge"],
        ["compare"],
        ["agreement"],
        ["human"],
        ["human", "export"],
        ["human", "import"],
        ["judges"],
        ["judges", "validate"],
    ):
        code, out, _ = _cli([*cmd, "--help"], capsys)
        assert code == 0 and "Usage" in out


def test_run_table_prints_agreement_from_the_summary(run3, fake_model, tmp_cache, capsys):
    """The printed results end with the judges' alpha lines, read from summary.json (nothing recomputed)."""
    import json

    from mascot_eval.cli.run import _print_results
    from mascot_eval.runs.summary import summarize

    a, b = fake_model("cli-a3", _judge_a), fake_model("cli-b3", _judge_b)
    code, _, err = _cli(["judge", str(run3.path), "--judges", f"{a},{b}", "--levels", "group", "--no-progress"], capsys)
    assert code == 0, err
    summarize(run3, n_boot=100)
    capsys.readouterr()
    _print_results(run3)
    out = capsys.readouterr().out
    assert "judge agreement (Krippendorff alpha, ordinal" in out
    s = json.loads(run3.summary_path.read_text())
    rec = next(r for r in s["agreement"] if r["statistic"] == "alpha_ordinal" and r["criterion"] == "overall")
    assert f"n={rec['n_items']}" in out and f"{rec['value']:+.3f}" in out
