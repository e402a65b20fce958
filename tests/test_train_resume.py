"""Stage 1 data steps with scripted models: artifacts, counts, resume after failures, refusal of stale steps."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from mascot_eval.errors import UserError
from mascot_eval.fileio import read_jsonl

pytestmark = pytest.mark.torch
REPO = Path(__file__).resolve().parent.parent
AGENT = ("emotion", "empathy", "consistency", "relevance", "contribution")


def judge_responder(req) -> str:
    """Deterministic pseudo-scores from the prompt; one prompt in six gets prose (unscored)."""
    h = hashlib.sha256(req.messages[-1]["content"].encode()).digest()
    if h[0] % 6 == 0:
        return "I think this reply is fine."
    return json.dumps({"rationale": "scripted", **{c: 1 + h[i + 1] % 5 for i, c in enumerate(AGENT)}})


def sampler_responder(req) -> str:
    return f"Reply number {req.params.sample_index} about {req.messages[-1]['content'][-30:]!r}. I am here."


def make_cfg(tmp_path: Path, fake_model, **over):
    from mascot_eval.train.config import load_config

    data = yaml.safe_load((REPO / "baselines/train/tiny.yaml").read_text())
    data["sampling_model"] = fake_model("sampler", sampler_responder)
    data["judge"] = fake_model("judge", judge_responder)
    data["judge_overrides"] = {}  # the scripted judge answers with its JSON verdict (generate mode)
    data["stage1"]["delta"] = 0.5
    data["data"]["contexts"] = 2
    data["stage1"]["candidates"] = 3
    data["stage1"]["reward_model"]["epochs"] = 2
    for k, v in over.items():
        data["stage1"][k] = v
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_config(p)


def test_stage1_data_steps_resume(tmp_path, fake_model, tmp_cache):
    from mascot_eval.backends.base import BackendError
    from mascot_eval.train.stage1 import run_stage1
    from tests import fakes

    cfg = make_cfg(tmp_path, fake_model)
    out = tmp_path / "ck"
    calls = {"n": 0}

    def flaky(req):
        calls["n"] += 1
        if calls["n"] % 4 == 0:
            raise BackendError("scripted outage", retryable=False)
        return sampler_responder(req)

    fake_model("sampler", flaky)
    with pytest.raises(UserError) as ei:
        run_stage1(cfg, out, data_only=True)
    assert "candidate calls failed" in str(ei.value) and ei.value.exit_code == 1
    partial = list(read_jsonl(out / "stage1" / "candidates.jsonl"))
    assert 0 < len(partial) < 18  # 2 contexts x 3 personas x 3 candidates, some failed

    fake_model("sampler", sampler_responder)
    ck = run_stage1(cfg, out, data_only=True)
    cands = list(read_jsonl(out / "stage1" / "candidates.jsonl"))
    assert len(cands) == 18 and len({c["key"] for c in cands}) == 18  # only the missing ones were sampled
    assert len(fakes.CALLS["sampler"]) == 18 - len(partial)

    judged = list(read_jsonl(out / "stage1" / "judged.jsonl"))
    assert len(judged) == 18
    unscored = [j for j in judged if j["status"] == "unscored"]
    assert all(j["aggregate"] is None and all(v is None for v in j["scores"].values()) for j in unscored)
    assert ck["steps"]["judged"]["unscored"] == len(unscored)
    pairs = list(read_jsonl(out / "stage1" / "pairs.jsonl"))
    assert pairs and all(p["chosen_score"] - p["rejected_score"] >= 0.5 for p in pairs)
    assert ck["metrics"]["stage1_pairs"]["kept"] == len(pairs)
    assert (out / "reward_model" / "head.safetensors").is_file()
    assert ck["schema"] == "mascot-checkpoint/1" and ck["base_model"] == "embedded"
    assert ck["judge"]["model"] == "fake/judge" and ck["data"]["contexts"] == 2
    rm_rows = [r for r in read_jsonl(out / "train_log.jsonl") if r.get("step_name") == "reward_model"]
    assert [r["epoch"] for r in rm_rows] == [1, 2] and all("heldout_acc" in r for r in rm_rows)

    # a rerun skips every finished step: no model call, reward model untouched
    n_judge = len(fakes.CALLS.get("judge", []))
    mtime = (out / "reward_model" / "head.safetensors").stat().st_mtime_ns
    fakes.CALLS.clear()
    run_stage1(cfg, out, data_only=True)
    assert fakes.CALLS.get("sampler", []) == [] and fakes.CALLS.get("judge", []) == []
    assert (out / "reward_model" / "head.safetensors").stat().st_mtime_ns == mtime
    assert n_judge >= 18

    # changing an input of a finished step is refused (the artifact would be stale)
    cfg2 = make_cfg(tmp_path, fake_model, delta=1.0)
    with pytest.raises(UserError, match="step 'pairs' was done with different inputs"):
        run_stage1(cfg2, out, data_only=True)


def test_too_few_pairs_says_why(tmp_path, fake_model, tmp_cache):
    from mascot_eval.train.stage1 import run_stage1

    cfg = make_cfg(tmp_path, fake_model, min_pairs=500)
    with pytest.raises(UserError) as ei:
        run_stage1(cfg, tmp_path / "ck", data_only=True)
    msg = str(ei.value)
    assert "too few preference pairs" in msg and "pairs kept from 18 candidates" in msg and "min_pairs is 500" in msg
    assert "\n" not in msg
