"""`mascot-eval tasks list|show|validate`, including every bad-input case: one line, exit 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("args", [["tasks"], ["tasks", "list"], ["tasks", "show"], ["tasks", "validate"]])
def test_help_everywhere(capsys, args):
    code, out, _ = run_cli([*args, "--help"], capsys)
    assert code == 0 and "Usage:" in out


def test_list(capsys):
    code, out, err = run_cli(["tasks", "list"], capsys)
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "SPLIT", "DOMAIN", "LOADER"]
    names = {line.split()[0] for line in lines[1:]}
    assert {
        "demo",
        "ed-positive",
        "ed-negative",
        "ed-neutral",
        "qmsum-academic",
        "qmsum-committee",
        "qmsum-product",
        "esconv",
    } <= names
    row = next(line for line in lines if line.startswith("ed-neutral"))
    assert "valence=neutral" in row and "empathetic_dialogues" in row and "100" in row


def test_show_prints_the_task_and_three_contexts(capsys, data_dir):
    code, out, _ = run_cli(["tasks", "show", "ed-positive", "--data-dir", str(data_dir)], capsys)
    assert code == 0
    assert "loader: empathetic_dialogues" in out and "filters: {valence: positive}" in out
    assert "# personas: Anchor (emotional validator), Catalyst (critical thinker), Beacon (growth advocate)" in out
    blocks = [line for line in out.splitlines() if line.startswith("[hit:")]
    assert len(blocks) == 3 and all("valence=positive" in b for b in blocks)
    assert "user=INTJ" in blocks[0] and "user=INTP" in blocks[1]
    code, out, _ = run_cli(["tasks", "show", "qmsum-committee", "--data-dir", str(data_dir), "-n", "1"], capsys)
    assert code == 0 and out.count("\n[qmsum-committee-") == 1 and "participants:" in out


def test_show_demo_without_data(capsys, monkeypatch):
    monkeypatch.delenv("MASCOT_DATA_DIR", raising=False)
    code, out, _ = run_cli(["tasks", "show", "demo"], capsys)
    assert code == 0 and out.count("\n[demo-") == 3 and "8 sampled" in out


def test_validate_prints_counts_per_task_source_and_split(capsys, data_dir):
    code, out, err = run_cli(["tasks", "validate", "--data-dir", str(data_dir)], capsys)
    assert code == 0, err
    assert "conversations 2547, emotions 32, valence (negative 1230, neutral 295, positive 1022)" in out
    assert "stray_quote 4" in out and "extra_fields 17" in out and "lf_only 30" in out
    assert "meetings 35, queries 281" in out
    assert "Academic (meetings 9, queries 58), Committee (meetings 6, queries 72), Product (meetings 20, queries 151)" in out
    assert "dialogues 195" in out
    assert "in_domain: 4 tasks, 308 contexts" in out and "ood: 4 tasks, 330 contexts" in out
    row = next(line for line in out.splitlines() if line.startswith("qmsum-product"))
    assert row.split()[5:7] == ["151", "100"]
    assert "ok: 8 task file(s) valid" in out


def test_validate_selected_paths(capsys, data_dir):
    code, out, _ = run_cli(
        ["tasks", "validate", str(REPO / "tasks" / "esconv.yaml"), "demo", "--data-dir", str(data_dir)], capsys
    )
    assert code == 0 and "ok: 2 task file(s) valid" in out


# ---- bad inputs -------------------------------------------------------------------------------------------

GOOD = """\
name: bad
split: in_domain
domain: emotional
source:
  loader: empathetic_dialogues
  path: empathetic_dialogues/test.csv
  filters: {valence: negative}
sample: {size: 3, seed: 2}
personas: emotional
"""


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _cases(data_dir: Path, tmp: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (task text, data dir, expected message part)."""
    raw = (data_dir / "empathetic_dialogues" / "test.csv").read_bytes()
    trunc = tmp / "trunc" / "empathetic_dialogues"
    trunc.mkdir(parents=True)
    (trunc / "test.csv").write_bytes(raw[:77_777])
    header = tmp / "header" / "empathetic_dialogues"
    header.mkdir(parents=True)
    (header / "test.csv").write_bytes(b"conv,idx,label,prompt,spk,utt,eval,tags\r\n" + raw.split(b"\n", 1)[1])
    real = str(data_dir)
    return {
        "malformed": (GOOD.replace("personas: emotional", "personas: [emotional"), real, "malformed YAML"),
        "unknown-field": (GOOD + "temprature: 0.2\n", real, "field 'temprature': unknown field"),
        "missing-persona": (GOOD.replace("personas: emotional", "personas: nobody"), real, "unknown persona group 'nobody'"),
        "unknown-loader": (GOOD.replace("loader: empathetic_dialogues", "loader: reddit"), real, "unknown loader 'reddit'"),
        "missing-file": (GOOD.replace("test.csv", "valid.csv"), real, "valid.csv: data file not found; MASCOT_DATA_DIR"),
        "truncated": (GOOD, str(tmp / "trunc"), "the file is truncated"),
        "wrong-header": (GOOD, str(tmp / "header"), "test.csv:1: header is 'conv,idx,label"),
    }


@pytest.mark.parametrize(
    "case", ["malformed", "unknown-field", "missing-persona", "unknown-loader", "missing-file", "truncated", "wrong-header"]
)
def test_bad_input_is_one_line_exit_2_nothing_written(capsys, tmp_path, data_dir, monkeypatch, case):
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    text, ddir, expected = _cases(data_dir, tmp_path / "d")[case]
    task = tmp_path / "bad.yaml"
    task.write_text(text)
    before = _tree(tmp_path)
    code, out, err = run_cli(["tasks", "validate", str(task), "--data-dir", ddir], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert "Traceback" not in err
    if case in ("missing-file", "truncated", "wrong-header"):
        assert str(Path(ddir).resolve() / "empathetic_dialogues") in lines[0]  # the data file is named
    else:
        assert str(task) in lines[0]  # the task file is named
    assert _tree(tmp_path) == before  # nothing written, not even the cache folder


def test_bad_input_from_the_console_script(tmp_path, data_dir):
    task = tmp_path / "bad.yaml"
    task.write_text(GOOD.replace("loader: empathetic_dialogues", "loader: qmsumm"))
    env = {**os.environ, "MASCOT_DATA_DIR": str(data_dir), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mascot_eval.cli.main", "tasks", "validate", str(task)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {task}: field 'source.loader': unknown loader 'qmsumm' (did you mean "
        f"'qmsum'?); known: demo, empathetic_dialogues, empathetic_dialogues_rated, esconv, esconv_rated, jsonl, qmsum"
    )


def test_offline_without_data_dir_names_the_variable(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("MASCOT_DATA_DIR", raising=False)
    monkeypatch.setenv("MASCOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    code, _, err = run_cli(["tasks", "show", "esconv"], capsys)
    assert code == 2
    assert err.strip() == (
        "error: esconv/test.txt: dataset file not available offline (no data directory, not in "
        f"{tmp_path / 'cache' / 'datasets'}); set MASCOT_DATA_DIR to a folder holding esconv/test.txt"
    )
    assert not (tmp_path / "cache").exists()


def test_one_bad_file_among_good_ones(capsys, tmp_path, data_dir):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("personas: emotional", "personas: nobody"))
    code, out, err = run_cli(["tasks", "validate", "demo", str(bad), "--data-dir", str(data_dir)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert out.splitlines()[1].startswith("demo") and "ok:" not in out


def test_unknown_task_name(capsys):
    code, _, err = run_cli(["tasks", "show", "ed-postive"], capsys)
    assert code == 2 and "did you mean 'ed-positive'" in err
