"""`mascot-eval train` bad input through the CLI: one clear line on stderr, exit 2, nothing half-written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from tests.cli_helpers import run_cli

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "baselines" / "train" / "tiny.yaml"
AGENT = ("emotion", "empathy", "consistency", "relevance", "contribution")


def _cfg(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("personas", ["anchor", "anker"], "field 'personas': unknown persona 'anker'"),
        ("judge", "gpt-7", "field 'judge': unknown judge 'gpt-7'"),
    ],
)
def test_unknown_persona_or_judge_exit_2(tmp_path, capsys, field, value, needle):
    data = yaml.safe_load(TINY.read_text())
    data[field] = value
    r = run_cli(["train", "all", "--config", str(_cfg(tmp_path, data)), "--out", str(tmp_path / "out")], capsys)
    code, err = r.code, r.err_lines
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["empty folder", "missing hub id"])
def test_base_model_that_cannot_load_exit_2(tmp_path, capsys, monkeypatch, kind):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if kind == "empty folder":
        (tmp_path / "not-a-model").mkdir()
        spec = f"hf/{tmp_path / 'not-a-model'}"
    else:
        spec = "hf/nobody-xyz/no-such-model-123"
    data = yaml.safe_load(TINY.read_text())
    data["base_model"] = spec
    r = run_cli(["train", "stage1", "--config", str(_cfg(tmp_path, data)), "--out", str(tmp_path / "out")], capsys)
    code, err = r.code, r.err_lines
    assert code == 2
    assert len(err) == 1 and f"base_model '{spec}': cannot load the model" in err[0]
    assert not (tmp_path / "out").exists()  # checked before anything is written


def _judge_all_equal(req) -> str:
    """Every candidate gets the same scores except one in nine: few pairs survive delta = 0.5."""
    h = hashlib.sha256(req.messages[-1]["content"].encode()).digest()
    base = 4 if h[0] % 9 else 2
    return json.dumps({"rationale": "scripted", **{c: base for c in AGENT}})


@pytest.mark.torch
def test_too_few_pairs_exit_2_says_how_many_and_why(tmp_path, capsys, fake_model, tmp_cache):
    from tests.train_helpers import config_data

    data = config_data(fake_model, delta=0.5, min_pairs=50)
    data["judge"] = fake_model("judge", _judge_all_equal)
    out = tmp_path / "out"
    r = run_cli(["train", "stage1", "--config", str(_cfg(tmp_path, data)), "--out", str(out)], capsys)
    code, err = r.code, r.err_lines
    assert code == 2
    msg = [e for e in err if e.startswith("error:")]
    assert len(msg) == 1, err
    m = msg[0]
    assert "too few preference pairs" in m and "pairs kept from 45 candidates" in m
    assert "differ by less than delta=0.5" in m and "stage1.min_pairs is 50" in m
    kept = int(m.split("too few preference pairs: ")[1].split(" pairs kept")[0])
    assert 0 <= kept < 50
    # the data steps before it are kept, so fixing the config resumes from the judged candidates
    assert (out / "stage1" / "judged.jsonl").is_file() and not (out / "stage1" / "pairs.jsonl").exists()
