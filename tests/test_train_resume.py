"""Stage 1 data steps with scripted models: rollouts of the system, candidates per state, judging, pairs and
the reward model; artifacts, counts, resume after failures, refusal of stale steps and of personas without pairs."""

from __future__ import annotations

import json

import pytest

from mascot_eval.errors import UserError
from mascot_eval.fileio import read_jsonl
from tests.train_helpers import AGENT, config_data, judge_responder, team_responder, write_config

pytestmark = pytest.mark.torch


def make_cfg(tmp_path, fake_model, **stage1):
    from mascot_eval.train.config import load_config

    return load_config(write_config(tmp_path, config_data(fake_model, **stage1)))


def test_stage1_data_steps_resume(tmp_path, fake_model, tmp_cache):
    from mascot_eval.backends.base import BackendError
    from mascot_eval.train.stage1 import run_stage1
    from tests import fakes

    cfg = make_cfg(tmp_path, fake_model)
    out = tmp_path / "ck"
    calls = {"n": 0}

    def flaky(req):
        if req.tag == "train:sample":
            calls["n"] += 1
            if calls["n"] % 4 == 0:
                raise BackendError("scripted outage", retryable=False)
        return team_responder(req)

    fake_model("team", flaky)
    with pytest.raises(UserError) as ei:
        run_stage1(cfg, out, data_only=True)
    assert "candidate calls failed" in str(ei.value) and ei.value.exit_code == 1
    rollouts = list(read_jsonl(out / "stage1" / "rollouts.jsonl"))
    assert len(rollouts) == 3 and all(r["system"] == "mascot-tiny" for r in rollouts)
    partial = list(read_jsonl(out / "stage1" / "candidates.jsonl"))
    n_turns = sum(len([t for t in r["turns"] if t["speaker"] != "user"]) for r in rollouts)
    assert n_turns == 3 * 2  # 3 contexts x 1 round x 2 speakers (mascot-tiny)
    # each turn's state is also offered to every persona the Director could have picked there: 3 + 2 per round
    n_states = 3 * (3 + 2)
    assert 0 < len(partial) < n_states * 3

    fake_model("team", team_responder)
    ck = run_stage1(cfg, out, data_only=True)
    cands = list(read_jsonl(out / "stage1" / "candidates.jsonl"))
    assert len(cands) == n_states * 3 and len({c["key"] for c in cands}) == len(cands)  # only the missing ones sampled
    assert len([c for c in fakes.CALLS["team"] if c.tag == "train:sample"]) == len(cands) - len(partial)
    assert all(c["directive"] and c["messages"][0]["role"] == "system" for c in cands)  # directive-conditioned prompts
    assert {c["persona"] for c in cands} == {"anchor", "catalyst", "beacon"}

    judged = list(read_jsonl(out / "stage1" / "judged.jsonl"))
    assert len(judged) == len(cands)
    unscored = [j for j in judged if j["status"] == "unscored"]
    assert all(j["aggregate"] is None and all(v is None for v in j["scores"].values()) for j in unscored)
    assert ck["steps"]["judged"]["unscored"] == len(unscored)
    pairs = list(read_jsonl(out / "stage1" / "pairs.jsonl"))
    assert pairs and all(p["chosen_score"] - p["rejected_score"] >= 0.5 for p in pairs)
    assert all(p["messages"] == next(c["messages"] for c in cands if c["key"] == p["chosen_key"]) for p in pairs)
    assert len({(p["state"], p["persona"]) for p in pairs}) >= 2  # pairs within a state, never across states
    assert ck["metrics"]["stage1_pairs"]["kept"] == len(pairs)
    assert (out / "reward_model" / "rm_config.json").is_file() and (out / "reward_model" / "adapter_config.json").is_file()
    assert ck["metrics"]["reward_model"]["trainer"] == "trl.RewardTrainer"
    assert ck["schema"] == "mascot-checkpoint/1" and ck["base_model"] == "embedded"
    assert ck["judge"]["model"] == "fake/judge" and ck["data"]["contexts"] == 3
    rm_rows = [r for r in read_jsonl(out / "train_log.jsonl") if r.get("step_name") == "reward_model"]
    assert rm_rows and all("heldout_accuracy" in r and "heldout_pairs" in r for r in rm_rows)

    # a rerun skips every finished step: no model call, reward model untouched
    mtime = (out / "reward_model" / "rm_config.json").stat().st_mtime_ns
    fakes.CALLS.clear()
    run_stage1(cfg, out, data_only=True)
    assert fakes.CALLS.get("team", []) == [] and fakes.CALLS.get("judge", []) == []
    assert (out / "reward_model" / "rm_config.json").stat().st_mtime_ns == mtime

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
    assert "too few preference pairs" in msg and "pairs kept from 45 candidates" in msg and "min_pairs is 500" in msg
    assert "\n" not in msg


def test_a_persona_without_pairs_is_not_trained(tmp_path, fake_model, tmp_cache):
    """One persona with 0 pairs was trained anyway (its adapter learnt from nothing)."""
    from mascot_eval.train.stage1 import run_stage1

    def flat_for_catalyst(req):
        if "candidate reply by Catalyst" in req.messages[-1]["content"]:
            return json.dumps({"rationale": "same", **{c: 3 for c in AGENT}})
        return judge_responder(req)

    cfg = make_cfg(tmp_path, fake_model)
    fake_model("judge", flat_for_catalyst)
    with pytest.raises(UserError) as ei:
        run_stage1(cfg, tmp_path / "ck", data_only=True)
    msg = str(ei.value)
    assert "too few preference pairs to train (catalyst 0;" in msg and "\n" not in msg
    assert not (tmp_path / "ck" / "reward_model").exists()


def test_judge_warning_when_training_judge_is_an_evaluation_judge(tmp_path, fake_model):
    from mascot_eval.train.config import load_config

    data = config_data(fake_model)
    data["judge"], data["evaluation_judges"] = "checks", ["checks", "local"]
    cfg = load_config(write_config(tmp_path, data))
    assert "training judge 'checks' is also an evaluation judge (checks)" in cfg.judge_warning()
    data["evaluation_judges"] = ["local"]
    assert load_config(write_config(tmp_path, data)).judge_warning() is None
    del data["evaluation_judges"]  # default: the data tasks' judging.judges (demo: local)
    data["judge"] = "local"
    assert "(local)" in load_config(write_config(tmp_path, data)).judge_warning()


def test_a_step_whose_stale_artifact_was_deleted_runs_again(tmp_path):
    """The refusal says 'delete ARTIFACT'; once it is deleted the step is simply not done (it reruns), not
    refused again for the record of its earlier inputs."""
    from mascot_eval.errors import UserError
    from mascot_eval.train.workdir import TrainDir

    td = TrainDir(tmp_path / "ck")
    td.root.mkdir(parents=True)
    art = td.root / "reward_model" / "rm_config.json"
    art.parent.mkdir()
    art.write_text("{}")
    td.mark_done("reward_model", "old-inputs")
    assert td.step_done("reward_model", "old-inputs", art)
    with pytest.raises(UserError, match=f"delete {art}"):
        td.step_done("reward_model", "new-inputs", art)
    art.unlink()
    assert td.step_done("reward_model", "new-inputs", art) is False
    td.mark_done("reward_model", "new-inputs")
    art.write_text("{}")
    assert td.step_done("reward_model", "new-inputs", art)
