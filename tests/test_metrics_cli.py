"""`mascot-eval metrics RUN_DIR` and `mascot-eval metrics --list`."""

from __future__ import annotations

import pandas as pd
import pytest

from mascot_eval.metrics import METRICS
from mascot_eval.metrics.compute import compute
from mascot_eval.metrics.table import system_means, system_table
from mascot_eval.runs.rundir import RunDir
from tests.cli_helpers import run_cli
from tests.metric_helpers import dialogue
from tests.runfactory import build_run, noisy_scores


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    rd = build_run(tmp_path / "run", systems=["mascot", "single"], score=noisy_scores({"mascot": 0.5, "single": 0}), n_contexts=4)
    return rd


def test_list_shows_every_metric_with_unit_and_definition(capsys):
    code, out, _ = run_cli(["metrics", "--list"], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:3] == ["name", "unit", "higher"]
    for name in METRICS.names():
        m = METRICS.get(name)
        line = next(x for x in lines if x.split()[0] == name)
        assert line.split()[1] == m.unit and m.higher in line
    assert "inter_agent_selfbleu" in out and "nltk" in out
    assert f"{len(METRICS.names())} metrics" in lines[-1]


def test_metrics_subset_writes_parquet_csv_and_manifest(run_dir, capsys):
    code, out, _ = run_cli(
        ["metrics", str(run_dir.path), "--metrics", "distinct_2, inter_agent_selfbleu,distinct_2_corpus"], capsys
    )
    assert code == 0
    df = pd.read_parquet(run_dir.metrics_path)
    csv = pd.read_csv(run_dir.path / "metrics.csv")
    assert set(df["metric"]) == {"distinct_2", "inter_agent_selfbleu", "distinct_2_corpus"}
    assert len(df) == len(csv) == 8 + 8 * 2 + 2  # 8 dialogues, 2 rounds each, 2 corpus rows
    assert pd.Series(df["value"]).equals(csv["value"]) or (abs(df["value"] - csv["value"]) < 1e-12).all()
    # the per-system table: header, dialogues, then one line per metric with both systems
    lines = out.splitlines()
    assert lines[0].split() == ["metric", "unit", "mascot", "single"]
    assert lines[1].split() == ["dialogues", "4", "4"]
    expected = system_means(compute(RunDir(run_dir.path).transcripts(), ["distinct_2"]))
    row = next(x for x in lines if x.startswith("distinct_2 "))
    assert row.split()[1:] == [
        "dialogue",
        f"{expected.loc['distinct_2', 'mascot']:.3f}",
        f"{expected.loc['distinct_2', 'single']:.3f}",
    ]
    assert "metrics.parquet" in lines[-1]
    info = RunDir(run_dir.path).read_manifest()["metrics"]
    assert info["names"] == ["distinct_2", "inter_agent_selfbleu", "distinct_2_corpus"]
    assert info["rows"] == len(df) and info["transcripts"] == 8 and "embeddings" not in info


@pytest.mark.slow
def test_metrics_all_by_default_with_real_embeddings(run_dir, capsys):
    assert run_cli(["metrics", str(run_dir.path)]).code == 0
    df = pd.read_parquet(run_dir.metrics_path)
    assert set(df["metric"]) == set(METRICS.names())
    info = RunDir(run_dir.path).read_manifest()["metrics"]
    assert info["embeddings"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    cos = df[df["metric"] == "inter_agent_cosine"]["value"]
    assert ((cos > 0) & (cos <= 1)).all()
    out = capsys.readouterr().out
    assert "persona_separability" in out and "corpus" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["metrics"], "pass RUN_DIR"),
        (["metrics", "{tmp}/nope"], "does not exist"),
        (["metrics", "{run}", "--metrics", "distinct2"], "did you mean"),
        (["metrics", "{run}", "--metrics", " , "], "--metrics: empty"),
        (["metrics", "{empty}"], "no transcripts"),
    ],
)
def test_user_errors_exit_2(run_dir, tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    args = [a.format(tmp=tmp_path, run=run_dir.path, empty=tmp_path / "empty") for a in args]
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_system_table_weights_dialogues_equally():
    long = dialogue(
        [("u", [("A", "a a"), ("B", "b")]), ("u", [("A", "c"), ("B", "d")]), ("u", [("A", "e"), ("B", "f")])],
        system="s",
        ctx="c1",
    )
    short = dialogue([("u", [("A", "a b c d"), ("B", "e")])], system="s", ctx="c2")
    df = compute([long, short], ["turn_length_tokens", "distinct_1_corpus"])
    means = system_means(df)
    # per-dialogue means 7/6 and 5/2, then their mean
    assert means.loc["turn_length_tokens", "s"] == pytest.approx((7 / 6 + 5 / 2) / 2)
    text = system_table(df)
    assert text.splitlines()[1].split() == ["dialogues", "2"]
    assert system_table(df.iloc[0:0]) == "(no metric values)"
