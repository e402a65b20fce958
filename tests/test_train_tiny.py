"""The `tiny` preset end to end on the embedded SmolLM2-135M: real sampling, the local judge, the
Bradley-Terry reward model, GRPO on LoRA per persona and for the Director; then the checkpoint is
evaluated with `generate --system mascot --checkpoint DIR` and the adapters are shown to be used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mascot_eval.fileio import read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.torch]

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "baselines" / "train" / "tiny.yaml"
PERSONAS = ("anchor", "catalyst", "beacon")


def _train(out: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MASCOT_RESPONSE_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mascot_eval.cli.main", "train", "all", "--config", str(TINY), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=900, cwd=REPO,
    )


def test_tiny_preset_trains_and_the_checkpoint_is_evaluated(tmp_path, tmp_cache):
    out = tmp_path / "ck"
    res = _train(out, tmp_cache)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "checkpoint:" in res.stdout and "peak memory" in res.stdout

    # checkpoint.json: base model, adapters, data/config hashes, judge, metrics
    ck = json.loads((out / "checkpoint.json").read_text())
    assert ck["schema"] == "mascot-checkpoint/1" and ck["base_model"] == "embedded"
    assert ck["base_model_info"]["path"] and ck["base_model_info"]["config_sha256"]
    assert set(ck["adapters"]) == {*PERSONAS, "director"}
    for name, rel in ck["adapters"].items():
        cfg = json.loads((out / rel / "adapter_config.json").read_text())
        assert cfg["r"] == 8 and set(cfg["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}, name
        assert (out / rel / "adapter_model.safetensors").stat().st_size > 0
    assert len(ck["config_hash"]) >= 12 and len(ck["data"]["contexts_hash"]) >= 12 and ck["data"]["contexts"] == 2
    assert ck["judge"]["name"] == "local" and ck["judge"]["model"] == "embedded" and ck["judge"]["spec_hash"]
    m = ck["metrics"]
    assert m["stage1_pairs"]["kept"] >= 1 and m["stage1_pairs"]["candidates"] == 2 * 3 * 2
    assert m["reward_model"]["train_pairs"] >= 1 and "heldout_acc" in m["reward_model"]
    for name in (*PERSONAS, "director"):
        share = m[f"adapter:{name}"]
        # LoRA r=8 on q/k/v/o of SmolLM2-135M: 30 layers x 8 x ((576+576)*2 + (576+192)*2) = 921,600 trainable
        assert share["trainable_params"] == 921_600 and 0.5 < share["trainable_pct"] < 0.8
    run = ck["runs"][-1]
    assert run["stage"] == "all" and run["seconds"] > 0 and run["peak_rss_mb"] > 100
    assert ck["plots"]["training_curves"] == "training_curves.png" and (out / "training_curves.png").stat().st_size > 1000
    for artifact in ("stage1/candidates.jsonl", "stage1/judged.jsonl", "stage1/pairs.jsonl", "stage2/rollouts.jsonl",
                     "reward_model/head.safetensors", "reward_model/metrics.json", "config.yaml"):
        assert (out / artifact).is_file(), artifact

    # training log: reward-model epochs with held-out accuracy, GRPO losses, rewards and KL per adapter, LoRA shares
    log = list(read_jsonl(out / "train_log.jsonl"))
    rm_rows = [r for r in log if r["step_name"] == "reward_model"]
    assert [r["epoch"] for r in rm_rows] == list(range(1, 11)) and all("heldout_acc" in r and "loss" in r for r in rm_rows)
    for name in (*PERSONAS, "director"):
        grpo = [r for r in log if r["step_name"] == "grpo" and r["name"] == name and "reward" in r]
        assert grpo and all(isinstance(r.get("loss"), float) and "kl" in r for r in grpo), name
        lora = [r for r in log if r["step_name"] == "lora" and r["name"] == name]
        assert lora and lora[0]["trainable_params"] == 921_600
    assert any("rewards/persona_reward/mean" in r for r in log)
    assert all("rm_score" in r and "format" in r for r in log if r["step_name"] == "grpo" and r["name"] in PERSONAS
               and "reward" in r)  # the composite reward's parts
    assert any("invalid_directive" in r for r in log if r["step_name"] == "grpo" and r["name"] == "director")
    assert any("rewards/director_reward/mean" in r for r in log)

    # a rerun reuses every finished step: nothing is sampled, judged or trained again
    adapter_mtime = (out / "adapters" / "director" / "adapter_model.safetensors").stat().st_mtime_ns
    n_log = len(log)
    again = _train(out, tmp_cache)
    assert again.returncode == 0, again.stderr[-3000:]
    for step in ("candidates", "judged", "reward model", "adapter anchor", "director adapter"):
        assert f"{step}: done" in again.stderr, step
    assert (out / "adapters" / "director" / "adapter_model.safetensors").stat().st_mtime_ns == adapter_mtime
    assert len(list(read_jsonl(out / "train_log.jsonl"))) == n_log

    # evaluate the checkpoint: every speaker and the Director run on base + their adapter
    from mascot_eval.backends import local
    from tests.cli_helpers import run_cli
    from mascot_eval.runs.rundir import RunDir

    # the shipped `mascot` system with shorter turns and one speaker per round, to keep CI time down
    system = yaml.safe_load((REPO / "baselines" / "mascot.yaml").read_text())
    system["decoding"]["max_tokens"] = 24
    system["options"]["director"]["max_tokens"] = 40
    system["options"]["max_speakers"] = 1
    (tmp_path / "mascot.yaml").write_text(yaml.safe_dump(system))
    rd = tmp_path / "run"
    code = run_cli(["generate", "--task", "demo", "--system", str(tmp_path / "mascot.yaml"), "--checkpoint", str(out),
                    "--limit", "1", "--out", str(rd), "--no-progress"]).code
    assert code == 0
    run_dir = RunDir(rd)
    [t] = run_dir.transcripts()
    ck_dir = str(out.resolve())
    for turn in t.agent_turns:
        pid = t.personas[turn.speaker].id
        assert turn.model == f"embedded#lora={ck_dir}/adapters/{pid}", turn.model
    manifest = run_dir.read_manifest()
    assert manifest["models"]["checkpoint"] == ck_dir and manifest["models"]["checkpoint_base_model"] == "embedded"
    roles = manifest["systems"]["mascot"]["models"]["demo"]
    assert roles["director"] == f"embedded#lora={ck_dir}/adapters/director"
    assert all(roles[f"agent:{p}"] == f"embedded#lora={ck_dir}/adapters/{p}" for p in PERSONAS)
    # the local engine really attached the adapters (PEFT) and ran generation through them
    from mascot_eval.backends.spec import adapter_hash

    loaded = {n for e in local._ENGINES.values() for n in e._adapters}
    used = {t.personas[turn.speaker].id for turn in t.agent_turns} | {"director"}
    for name in used:
        assert f"a{adapter_hash((out / 'adapters' / name).resolve())}" in loaded, name
