"""Serving adapters through a vLLM OpenAI server (scripted here): the trainer registers adapters at runtime
and samples with their served names; `--checkpoint DIR@URL` evaluates a checkpoint's per-persona adapters
through the server; `train serve DIR` prints the matching `vllm serve --enable-lora --lora-modules` command."""

from __future__ import annotations

import json
from pathlib import Path


from tests.cli_helpers import run_cli
from tests.test_backends_http import _serve

PERSONAS = ("anchor", "catalyst", "beacon")


def _checkpoint(tmp_path: Path, base: str = "hf/Qwen/Qwen3-0.6B") -> Path:
    d = tmp_path / "ck"
    adapters = {}
    for name in (*PERSONAS, "director", "sft"):
        a = d / "adapters" / name
        a.mkdir(parents=True)
        (a / "adapter_config.json").write_text(json.dumps({"r": 16, "peft_type": "LORA"}))
        (a / "adapter_model.safetensors").write_bytes(name.encode())
        adapters[name] = f"adapters/{name}"
    (d / "checkpoint.json").write_text(
        json.dumps({"schema": "mascot-checkpoint/1", "base_model": base, "persona_group": "emotional", "adapters": adapters})
    )
    return d


def _openai_server(seen: list[dict]):
    def reply(handler, body):
        seen.append({"path": handler.path, **body})
        if handler.path.endswith("/load_lora_adapter"):
            return 200, {"ok": True}, {}
        text = (
            '{"speaker": "Catalyst", "action": "ask", "tone": "calm"}'
            if "Director" in json.dumps(body["messages"])
            else "That sounds hard. What would help right now?"
        )
        return (
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
            },
            {},
        )

    return _serve(reply)


def test_checkpoint_at_url_maps_roles_to_served_adapter_names(tmp_path):
    from mascot_eval.systems.checkpoint import load_checkpoint, resolve_models
    from mascot_eval.systems.config import load_system_config
    from mascot_eval.personas import get_group

    d = _checkpoint(tmp_path)
    ck = load_checkpoint(f"{d}@http://127.0.0.1:8000/v1")
    assert ck.dir == d.resolve() and ck.serve_url == "http://127.0.0.1:8000/v1"
    _, cards = get_group("emotional")
    roles = resolve_models(load_system_config("mascot"), cards, default_model="embedded", checkpoint=ck)
    assert roles["agent:catalyst"] == "openai-compatible/catalyst@http://127.0.0.1:8000/v1"
    assert roles["director"] == "openai-compatible/director@http://127.0.0.1:8000/v1"
    assert roles["aux"] == "openai-compatible/Qwen/Qwen3-0.6B@http://127.0.0.1:8000/v1"  # the served base
    sft = resolve_models(load_system_config("sft"), cards, default_model="embedded", checkpoint=ck)
    assert {sft[f"agent:{p}"] for p in PERSONAS} == {"openai-compatible/sft@http://127.0.0.1:8000/v1"}
    local = load_checkpoint(d)  # without a URL: local adapters, as before
    assert (
        resolve_models(load_system_config("mascot"), cards, default_model="embedded", checkpoint=local)["agent:anchor"]
        == f"hf/Qwen/Qwen3-0.6B#lora={(d / 'adapters' / 'anchor').resolve()}"
    )


def test_run_with_checkpoint_through_a_server(tmp_path, tmp_cache, capsys):
    from mascot_eval.runs.rundir import RunDir

    seen: list[dict] = []
    srv = _openai_server(seen)
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    try:
        d = _checkpoint(tmp_path)
        code, _, err = run_cli(
            [
                "generate",
                "--task",
                "demo",
                "--system",
                "mascot",
                "--checkpoint",
                f"{d}@{url}",
                "--limit",
                "1",
                "--user-model",
                f"openai-compatible/base@{url}",
                "--out",
                str(tmp_path / "run"),
                "--no-progress",
            ],
            capsys,
        )
        assert code == 0, err
    finally:
        srv.shutdown()
    [t] = RunDir(tmp_path / "run").transcripts()
    for turn in t.agent_turns:
        assert turn.model == f"openai-compatible/{t.personas[turn.speaker].id}@{url}"
    models = {b["model"] for b in seen}
    assert "director" in models and models & set(PERSONAS)


def test_trainer_registers_adapters_at_runtime(tmp_path):
    from mascot_eval.train import serving
    from mascot_eval.train.config import Serving

    seen: list[dict] = []
    srv = _openai_server(seen)
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    try:
        d = _checkpoint(tmp_path)

        class Cfg:
            serving = Serving(url=url, model="Qwen/Qwen3-0.6B", prefix="t")
            sampler = "unused"

        spec = serving.role_spec(Cfg, "sft", d / "adapters" / "sft")
        again = serving.role_spec(Cfg, "sft", d / "adapters" / "sft")
        assert spec == again and spec.startswith("openai-compatible/t-sft-") and spec.endswith(f"@{url}")
        loads = [b for b in seen if b["path"].endswith("/load_lora_adapter")]
        assert len(loads) == 1 and loads[0]["lora_path"] == str((d / "adapters" / "sft").resolve())
        assert loads[0]["lora_name"] == spec.split("/", 1)[1].split("@")[0]
        assert serving.role_spec(Cfg, None, None) == f"openai-compatible/Qwen/Qwen3-0.6B@{url}"
    finally:
        srv.shutdown()


def test_train_serve_prints_the_vllm_command(tmp_path, capsys):
    d = _checkpoint(tmp_path)
    code, out, err = run_cli(["train", "serve", str(d), "--port", "8123"], capsys)
    assert code == 0, err
    assert out.startswith("vllm serve Qwen/Qwen3-0.6B --port 8123 --enable-lora --max-lora-rank 16")
    assert f"anchor={(d / 'adapters' / 'anchor').resolve()}" in out and "enable_thinking" in out
