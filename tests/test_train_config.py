"""Training config: presets load, bad fields give one-line errors naming the field, CLI exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mascot_eval.errors import UserError
from mascot_eval.train.config import load_config, personas_of
from tests.cli_helpers import run_cli

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "baselines" / "train" / "tiny.yaml"
PAPER = REPO / "baselines" / "train" / "paper.yaml"


def _write(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(TINY.read_text())
    for dotted, value in changes.items():
        node = data
        keys = dotted.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_presets_load():
    tiny, paper = load_config(TINY), load_config(PAPER)
    assert tiny.base_model == "embedded" and tiny.judge == "checks"
    assert [c.id for c in personas_of(tiny)] == ["anchor", "catalyst", "beacon"]
    assert tiny.system_ref.endswith("baselines/train/systems/mascot-tiny.yaml") and tiny.sft.enabled
    assert paper.sft.enabled and paper.system == "mascot" and paper.judge == "gpt"
    smoke = load_config(REPO / "baselines" / "train" / "gpu-smoke.yaml")
    assert smoke.base_model.endswith("Qwen3-0.6B") and smoke.stage1.grpo.bf16
    assert paper.stage1.lora.r == 16 and paper.stage1.lora.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert paper.stage1.delta == 0.5 and paper.launch.accelerate
    assert tiny.config_hash() != paper.config_hash()


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"personas": ["anchor", "ankor"]}, "field 'personas': unknown persona 'ankor'"),
        ({"judge": "gtp"}, "field 'judge': unknown judge 'gtp'"),
        ({"persona_group": "nope"}, "field 'persona_group'"),
        ({"data__tasks": ["no-such-task"]}, "field 'data.tasks'"),
        ({"stage1__grpo__batch_size": 3}, "multiple of num_generations"),
        ({"stage1__candidates": 1}, "field 'stage1.candidates'"),
        ({"stage1__lora__rank": 4}, "field 'stage1.lora.rank': unknown field"),
        ({"stage2__reward__criteria": ["fidelity", "vibes"]}, "unknown group criterion 'vibes'"),
        ({"system": "zero-shot"}, "field 'system': 'zero-shot' is of kind 'prompted'"),
        ({"system": "no-such-system"}, "field 'system': unknown system"),
        ({"evaluation_judges": ["nope"]}, "field 'evaluation_judges': unknown judge 'nope'"),
        ({"sft__data__tasks": ["no-such-task"]}, "field 'sft.data.tasks'"),
        ({"data__tasks": ["qmsum-product"]}, "plays persona group 'workplace'"),
    ],
)
def test_bad_config_one_line(tmp_path, changes, needle):
    p = _write(tmp_path, **changes)
    with pytest.raises(UserError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg and str(p) in msg


def test_cli_bad_config_exits_2(tmp_path, capsys):
    p = _write(tmp_path, judge="nobody")
    r = run_cli(["train", "stage1", "--config", str(p), "--out", str(tmp_path / "out")], capsys)
    assert r.code == 2
    err = r.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "unknown judge 'nobody'" in err[0]
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_base_model_spec_checked():
    from mascot_eval.train.basemodel import resolve_base

    with pytest.raises(UserError, match="embedded' or 'hf/"):
        resolve_base("openai/gpt-4o")
    with pytest.raises(UserError, match="plain base model"):
        resolve_base("embedded#lora=/x")


def test_judge_overrides_apply_to_training_only(tmp_path):
    from mascot_eval.judges.specs import resolve_judge
    from mascot_eval.train.stage1 import judge_info

    over = load_config(
        _write(tmp_path, judge="local", judge_overrides={"mode": "logprob", "max_tokens": 120, "reask": 0, "top_logprobs": 0})
    )
    spec = over.judge_spec()
    assert spec.name == "local" and spec.decoding.max_tokens == 120 and spec.reask == 0 and spec.decoding.top_logprobs == 0
    file_spec = resolve_judge("local")
    assert file_spec.decoding.max_tokens != 120  # the judge file itself is untouched (evaluation uses it)
    plain = load_config(_write(tmp_path, judge="local", judge_overrides={}))
    assert plain.judge_spec().decoding == file_spec.decoding
    assert judge_info(over)["spec_hash"] != judge_info(plain)["spec_hash"]  # judged rows are redone when it changes
    assert judge_info(over)["overrides"] == {"max_tokens": 120, "reask": 0, "top_logprobs": 0, "mode": "logprob"}
    assert "overrides" not in judge_info(plain)
    with pytest.raises(UserError, match="judge_overrides.max_tokens"):
        load_config(_write(tmp_path, judge_overrides={"max_tokens": 2}))
