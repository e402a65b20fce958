"""vLLM for real, on CPU: the in-process ``vllm/`` backend and the OpenAI-compatible server.

Both use the vLLM venv (``make vllm-venv``; its python comes from ``MASCOT_VLLM_PYTHON``, which
``make test`` sets, else ``<repo>/.venv-vllm/bin/python``). The embedded SmolLM2 folder is
converted here, in the main venv, and handed to vLLM explicitly, so nothing depends on which
cache the vLLM venv would look in.

- ``vllm/<dir>`` runs in a subprocess of the vLLM python (tests/vllm_child.py) through our
  ModelClient: concurrent batching, usage, log-probs, the cache, a random PEFT LoRA adapter made
  here with peft, reproducible sampling, and a bad request that fails alone.
- ``python -m vllm.entrypoints.openai.api_server`` serves the same folder (one server for the
  module), reached through ``openai-compatible/<name>@http://127.0.0.1:<port>/v1`` with the real
  openai SDK.

CPU settings that matter (see mascot_eval/backends/vllm_engine.py): ``--enforce-eager`` (torch
compile takes minutes on two cores), ``OMP_WAIT_POLICY=PASSIVE`` (spinning OpenMP threads starve
the engine's scheduler), ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` with the ``uni`` executor (one
process fewer to start, each costs ~25 s of imports) and a small ``VLLM_CPU_KVCACHE_SPACE``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from mascot_eval.backends.base import BackendError, GenerationParams
from mascot_eval.backends.client import ClientSettings, ModelClient
from mascot_eval.backends.usage import LEDGER

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
SERVED = "smollm2"
STARTUP_TIMEOUT_S = 420
CHILD_TIMEOUT_S = 480


def _vllm_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        OMP_WAIT_POLICY="PASSIVE",
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    env = os.environ.get("MASCOT_VLLM_PYTHON")
    path = Path(env) if env else REPO / ".venv-vllm" / "bin" / "python"
    if not path.exists():
        pytest.skip(f"no vLLM venv python at {path}: build it with `make vllm-venv` (or set MASCOT_VLLM_PYTHON)")
    return path


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from mascot_eval.backends.modeldir import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="module")
def lora_dir(model_dir, tmp_path_factory) -> Path:
    """A rank-8 LoRA on q/v projections with random (non-zero) B, so it really changes the output."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    out = tmp_path_factory.mktemp("lora") / "adapter"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    cfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM")
    get_peft_model(model, cfg).save_pretrained(out)
    return out


def _tail(path: Path, n: int = 40) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if "Attempted to load weight" not in ln]
    return "\n".join(lines[-n:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            try:  # the leader is gone; make sure no child of the group outlives it
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def vllm_server(vllm_python, model_dir, tmp_path_factory):
    """One vLLM OpenAI server for the module; yields its base URL."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("vllm-server") / "server.log"
    cmd = [
        str(vllm_python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", SERVED,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "1024", "--max-num-seqs", "8",
        "--enforce-eager", "--distributed-executor-backend", "uni", "--seed", "0",
    ]  # fmt: skip
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_vllm_env(), start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited with {proc.returncode} during start-up:\n{_tail(log_path)}")
            if time.perf_counter() - t0 > STARTUP_TIMEOUT_S:
                pytest.fail(f"vLLM server not ready after {STARTUP_TIMEOUT_S} s:\n{_tail(log_path)}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as r:
                    models = json.load(r)
                break
            except OSError:
                time.sleep(1)
        assert [m["id"] for m in models["data"]] == [SERVED]
        print(f"vLLM server ready in {time.perf_counter() - t0:.1f} s")
        yield base
    finally:
        _stop(proc)
    assert proc.poll() is not None


def test_inprocess_vllm_backend(vllm_python, model_dir, lora_dir, tmp_path):
    env = _vllm_env()
    env["MASCOT_VLLM_MAX_LORA_RANK"] = "8"
    env["MASCOT_VLLM_DTYPE"] = "float32"  # "auto" picks bfloat16 only where the CPU has it; keep answers hardware-independent
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(vllm_python), str(REPO / "tests" / "vllm_child.py"), str(model_dir), str(lora_dir), str(tmp_path / "cache")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    r = json.loads(lines[-1][len("RESULT ") :])
    print(f"in-process child: {time.perf_counter() - t0:.1f} s, engine load + first call {r['load_and_first_s']:.1f} s")

    # Greedy generation with usage and top-3 log-probs, best first.
    for out in r["base"]:
        assert out["text"].strip() and not out["cached"]
        assert out["finish_reason"] in ("stop", "length")
        assert out["prompt_tokens"] > 10 and 1 <= out["completion_tokens"] <= 12
        lps = out["top_logprobs"]
        assert len(lps) == out["completion_tokens"]
        for pos in lps:
            assert len(pos) == 3
            values = [lp for _, lp in pos]
            assert all(v <= 0 for v in values) and values == sorted(values, reverse=True)
    assert "Paris" in r["base"][1]["text"]
    assert r["base_calls"] == 4
    # Concurrent calls were gathered into batches rather than run one by one.
    assert max(r["batches"]) >= 3, r["batches"]

    # Second identical round: all from the cache, no model call.
    assert all(o["cached"] for o in r["again"]) and r["calls_after_again"] == 4
    assert [o["text"] for o in r["again"]] == [o["text"] for o in r["base"]]

    # LoRA: served in the same batches as base requests; base answers match the greedy ones,
    # and the random adapter changes at least some answers.
    assert r["lora_calls"] == 4
    assert all(o["text"].strip() for o in r["lora"])
    assert [o["text"] for o in r["base_plain"]] == [o["text"] for o in r["base"]]
    assert sum(a["text"] != b["text"] for a, b in zip(r["lora"], r["base_plain"])) >= 2

    # Sampling: sample_index gives distinct samples, reproduced by an uncached client.
    assert len(set(r["samples"])) == 3
    assert r["samples_again"] == r["samples"]

    # Over-long prompt: fails alone with the cause named; its batch mate is answered.
    bad, good = r["long"]
    assert bad.get("backend_error") and "maximum context length" in bad["error"]
    assert good.get("text") and good["completion_tokens"] == 4

    # Structured outputs: the schema'd answer is JSON naming one of the enumerated speakers.
    sch = r["schema"]
    assert sch["supports"] is True
    assert json.loads(sch["constrained"]["text"])["speaker"] in ("Anchor", "Catalyst", "Beacon"), sch
    assert sch["free"]["text"].strip()

    ledger = r["ledger"]
    assert ledger["again"]["cached"] == 4 and ledger["again"]["prompt_tokens"] == 0
    assert ledger["base"]["prompt_tokens"] == sum(o["prompt_tokens"] for o in r["base"][1:])
    assert ledger["lora"]["completion_tokens"] == sum(o["completion_tokens"] for o in r["lora"])


def _client(base: str, tmp_path: Path, model: str = SERVED, **kw) -> ModelClient:
    return ModelClient(f"openai-compatible/{model}@{base}", ClientSettings(cache_dir=str(tmp_path / "cache"), **kw))


def test_server_chat_usage_cache_logprobs(vllm_server, tmp_path):
    client = _client(vllm_server, tmp_path)
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    params = GenerationParams(max_tokens=12, top_logprobs=3)
    tag = "test:vllm-server"
    before = LEDGER.snapshot()["by_tag"].get(tag)
    assert before is None

    async def go():
        first = await client.chat(msgs, params, tag=tag)
        second = await client.chat(msgs, params, tag=tag)
        plain = await client.chat(msgs, GenerationParams(max_tokens=12), tag=tag)
        await client.aclose()
        return first, second, plain

    first, second, plain = asyncio.run(go())
    assert "Paris" in first.text and first.finish_reason in ("stop", "length")
    assert first.model == client.spec and not first.cached
    assert first.usage.prompt_tokens > 10 and 1 <= first.usage.completion_tokens <= 12
    # Log-probs: one entry per generated token, 3 alternatives each, best first; greedy picks the best.
    assert len(first.top_logprobs) == first.usage.completion_tokens
    for pos in first.top_logprobs:
        values = [lp for _, lp in pos]
        assert len(pos) == 3 and all(v <= 0 for v in values) and values == sorted(values, reverse=True)
    assert first.text.startswith("".join(pos[0][0] for pos in first.top_logprobs)[: len(first.text)])
    # The second identical call is served by the cache; without log-probs it is a new request.
    assert second.cached and second.text == first.text and second.top_logprobs == first.top_logprobs
    assert not plain.cached and plain.top_logprobs is None and plain.text == first.text
    assert client.calls == 2
    tally = LEDGER.snapshot()["by_tag"][tag]
    assert tally["calls"] == 3 and tally["cached"] == 1 and tally["failures"] == 0
    assert tally["prompt_tokens"] == first.usage.prompt_tokens + plain.usage.prompt_tokens
    assert tally["completion_tokens"] == first.usage.completion_tokens + plain.usage.completion_tokens


def test_server_concurrent_requests_and_unknown_model(vllm_server, tmp_path):
    client = _client(vllm_server, tmp_path, max_connections=6)
    prompts = [f"Write one short sentence about the number {i}." for i in range(6)]

    async def go():
        t0 = time.perf_counter()
        rs = await asyncio.gather(
            *(client.chat([{"role": "user", "content": p}], GenerationParams(max_tokens=16)) for p in prompts)
        )
        return rs, time.perf_counter() - t0

    rs, elapsed = asyncio.run(go())
    assert client.calls == 6 and all(r.text.strip() and r.usage.completion_tokens >= 1 for r in rs)
    print(f"6 concurrent requests in {elapsed:.2f} s")

    wrong = _client(vllm_server, tmp_path, model="no-such-model", max_retries=3, backoff_base_s=0.01)
    with pytest.raises(BackendError) as err:
        asyncio.run(wrong.chat([{"role": "user", "content": "hi"}], GenerationParams(max_tokens=4)))
    assert err.value.status == 404 and "not retried" in str(err.value)
    assert wrong.calls == 1


def test_lora_rank_above_engine_limit_is_refused_up_front(lora_dir, model_dir, monkeypatch):
    from mascot_eval.backends.client import make_backend
    from mascot_eval.errors import UserError

    monkeypatch.setenv("MASCOT_VLLM_MAX_LORA_RANK", "4")
    with pytest.raises(UserError, match="LoRA rank 8 is above .* MASCOT_VLLM_MAX_LORA_RANK=8"):
        make_backend(f"vllm/{model_dir}#lora={lora_dir}")
    monkeypatch.setenv("MASCOT_VLLM_MAX_LORA_RANK", "8")
    backend = make_backend(f"vllm/{model_dir}#lora={lora_dir}")
    assert backend.cache_identity["lora"]["hash"] == backend.adapter_hash
