"""``vllm/<path-or-id>``: the in-process ``vllm.LLM`` engine (imported lazily), LoRA via ``LoRARequest``.

``vllm/embedded`` names the converted embedded SmolLM2 folder. vLLM pins its own transformers,
so it usually lives in its own virtual environment (``make vllm-venv``, which also installs
mascot-eval there); run mascot-eval from there (``.venv-vllm/bin/mascot-eval run --model
vllm/embedded``) or serve the model with ``python -m vllm.entrypoints.openai.api_server`` and
use ``openai-compatible/...`` (docs/backends.md, "vLLM").

Concurrent calls are gathered like the embedded backend's and handed to one ``LLM.chat`` call
with per-request sampling parameters and LoRA requests; vLLM schedules them continuously. A
batch that vLLM rejects (say one prompt longer than the context) is retried request by request,
so only the bad request fails.

The engine runs inside this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: no engine-core
subprocess to spawn, which saves ~25 s of imports per process on a small CPU machine). On CPU
it runs eagerly (no torch.compile warm-up, minutes on two cores) and sets
``OMP_WAIT_POLICY=PASSIVE``: spinning OpenMP threads otherwise starve the Python thread that
schedules the engine and generation becomes ~20x slower. When torch was imported before the
engine (too late for that variable) it uses one torch thread instead, which is as fast here.
Every variable is only a default; a value already in the environment wins.

Engine settings come from the environment: ``MASCOT_VLLM_DTYPE`` (default ``auto``),
``MASCOT_VLLM_MAX_MODEL_LEN`` (2048), ``MASCOT_VLLM_ENABLE_LORA`` (1),
``MASCOT_VLLM_MAX_LORA_RANK`` (64; adapters of a higher rank are refused up front),
``MASCOT_VLLM_ENFORCE_EAGER`` (1 on CPU, 0 elsewhere) and ``VLLM_CPU_KVCACHE_SPACE`` (GiB, 2).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .base import Backend, BackendError, ChatRequest, ChatResponse, Usage
from .batching import next_batch
from .spec import adapter_hash, parse_spec

log = logging.getLogger(__name__)

BATCH_WINDOW_S = 0.02


@dataclass
class _Job:
    request: ChatRequest
    lora: tuple[str, int, Path] | None
    future: concurrent.futures.Future[ChatResponse] = field(default_factory=concurrent.futures.Future)


class VLLMEngine:
    def __init__(self, model_ref: str) -> None:
        self.model_ref = model_ref
        self.llm: Any = None
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.batches: list[int] = []  # size of every batch handed to LLM.chat
        self.lora_enabled = False

    def submit(self, request: ChatRequest, lora: tuple[str, int, Path] | None) -> concurrent.futures.Future[ChatResponse]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._worker, name="mascot-vllm", daemon=True)
                self._thread.start()
        job = _Job(request, lora)
        self._queue.put(job)
        return job.future

    def load(self) -> None:
        if self.llm is not None:
            return
        # Defaults only (a value the user set wins); they must be in place before torch/vLLM load.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        torch_loaded = "torch" in sys.modules  # OpenMP read its settings already
        if not torch_loaded:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from vllm import LLM
            from vllm.platforms import current_platform
        except ImportError as exc:
            raise UserError(
                f"vllm/ models need vLLM in this Python ({exc}); use the vLLM venv (`make vllm-venv`) or serve the "
                "model and use openai-compatible/<model>@http://host:port/v1"
            ) from None
        on_cpu = current_platform.is_cpu()
        if on_cpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
            if torch_loaded and os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
                # Too late for the passive policy: one OpenMP thread at least leaves no thread spinning.
                import torch

                log.info("torch was imported before vLLM with OpenMP spin-waiting; using 1 thread (set OMP_WAIT_POLICY=PASSIVE)")
                torch.set_num_threads(1)
        enable_lora = _env_flag("MASCOT_VLLM_ENABLE_LORA", True)
        kwargs: dict[str, Any] = {}
        if enable_lora:
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank(), max_loras=4)
        self.llm = LLM(
            model=self.model_ref,
            dtype=os.environ.get("MASCOT_VLLM_DTYPE", "auto"),
            max_model_len=int(os.environ.get("MASCOT_VLLM_MAX_MODEL_LEN", "2048")),
            enforce_eager=_env_flag("MASCOT_VLLM_ENFORCE_EAGER", on_cpu),
            seed=0,
            **kwargs,
        )
        self.lora_enabled = enable_lora

    def _worker(self) -> None:
        while True:
            jobs = next_batch(self._queue, BATCH_WINDOW_S)
            if not jobs:
                continue
            try:
                self.load()
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for j in jobs:
                    j.future.set_exception(_as_backend_error(exc, "loading the vLLM engine"))
                continue
            try:
                results = self._run(jobs)
            except BaseException as exc:  # noqa: BLE001
                if len(jobs) == 1:
                    jobs[0].future.set_exception(_as_backend_error(exc, "vLLM generation"))
                    continue
                # One bad request (too long a prompt, a broken adapter) must not fail the others.
                log.info("vLLM batch of %d failed (%s); running its requests one by one", len(jobs), exc)
                for j in jobs:
                    try:
                        j.future.set_result(self._run([j])[0])
                    except BaseException as one:  # noqa: BLE001
                        j.future.set_exception(_as_backend_error(one, "vLLM generation"))
                continue
            for j, r in zip(jobs, results):
                j.future.set_result(r)

    def _run(self, jobs: list[_Job]) -> list[ChatResponse]:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        t0 = time.perf_counter()
        sps, loras = [], []
        for j in jobs:
            p = j.request.params
            sps.append(
                SamplingParams(
                    max_tokens=p.max_tokens,
                    temperature=p.temperature,
                    top_p=p.top_p,
                    seed=_seed(p),
                    stop=list(p.stop) or None,
                    logprobs=_top_k(p) or None,
                    **_structured(p),
                )
            )
            if j.lora and not self.lora_enabled:
                raise UserError("this vLLM engine was started with MASCOT_VLLM_ENABLE_LORA=0; unset it to use #lora=")
            loras.append(LoRARequest(j.lora[0], j.lora[1], str(j.lora[2])) if j.lora else None)
        outs = self.llm.chat([j.request.messages for j in jobs], sampling_params=sps, lora_request=loras, use_tqdm=False)
        self.batches.append(len(jobs))
        elapsed = time.perf_counter() - t0
        results = []
        for j, o in zip(jobs, outs):
            c = o.outputs[0]
            top = None
            k = _top_k(j.request.params)
            if k and c.logprobs:
                # vLLM adds the sampled token to the top k when it ranks lower; keep the k best, best first.
                top = [
                    [
                        (lp.decoded_token or "", float(lp.logprob))
                        for lp in sorted(pos.values(), key=lambda x: x.rank if x.rank is not None else 1 << 30)[:k]
                    ]
                    for pos in c.logprobs
                ]
            results.append(
                ChatResponse(
                    text=c.text,
                    finish_reason=c.finish_reason or "stop",
                    usage=Usage(prompt_tokens=len(o.prompt_token_ids or []), completion_tokens=len(c.token_ids)),
                    latency_s=elapsed,
                    model="",
                    top_logprobs=top,
                )
            )
        return results


def _env_flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise UserError(f"{name}={v!r}: use 1 or 0")


def max_lora_rank() -> int:
    v = os.environ.get("MASCOT_VLLM_MAX_LORA_RANK", "64")
    try:
        return int(v)
    except ValueError:
        raise UserError(f"MASCOT_VLLM_MAX_LORA_RANK={v!r}: give a number such as 64") from None


def _top_k(p: Any) -> int:
    """How many log-probabilities per generated token the caller wants (0: none)."""
    return max(1, p.top_logprobs) if (p.logprobs or p.top_logprobs) else 0


def _structured(p: Any) -> dict[str, Any]:
    """JSON-schema constrained generation (vLLM's structured outputs) when the request has a schema."""
    if p.json_schema is None:
        return {}
    from vllm.sampling_params import StructuredOutputsParams

    return {"structured_outputs": StructuredOutputsParams(json=p.json_schema)}


def _seed(p: Any) -> int | None:
    """Sampled generations get a seed from (seed, sample_index) so reruns repeat the k-th sample."""
    if p.seed is None and p.temperature <= 0:
        return None
    return (p.seed or 0) + 1_000_003 * p.sample_index


def _as_backend_error(exc: BaseException, what: str) -> BaseException:
    if isinstance(exc, (UserError, BackendError)):
        return exc
    return BackendError(f"{what} failed: {type(exc).__name__}: {exc}", retryable=False)


def _adapter_rank(folder: Path) -> int | None:
    try:
        cfg = json.loads((folder / "adapter_config.json").read_text())
    except (OSError, ValueError):
        return None
    ranks = [cfg.get("r")] + list((cfg.get("rank_pattern") or {}).values())
    ranks = [r for r in ranks if isinstance(r, int)]
    return max(ranks) if ranks else None


_ENGINES: dict[str, VLLMEngine] = {}
_LOCK = threading.Lock()


class VLLMBackend(Backend):
    kind = "vllm"
    supports_json_schema = True  # structured outputs (json schema)

    def __init__(self, spec: str) -> None:
        p = parse_spec(spec, allow_lora=True)
        if not p.model:
            raise UserError(f"model spec '{spec}': name a folder, hub id or 'embedded' after 'vllm/'")
        if p.model == "embedded":
            from .modeldir import embedded_model_dir

            ref = str(embedded_model_dir())
        else:
            path = Path(p.model).expanduser()
            ref = str(path.resolve()) if path.exists() else p.model
        super().__init__(spec, model=ref)
        self.lora: tuple[str, int, Path] | None = None
        self.adapter_hash: str | None = None
        if p.lora is not None:
            folder = p.lora.resolve()
            self.adapter_hash = adapter_hash(folder)
            rank, limit = _adapter_rank(folder), max_lora_rank()
            if rank is not None and rank > limit:
                raise UserError(
                    f"{folder}: LoRA rank {rank} is above the vLLM engine's limit {limit}; "
                    f"set MASCOT_VLLM_MAX_LORA_RANK={rank} (or higher)"
                )
            self.lora = (f"a{self.adapter_hash}", int(self.adapter_hash[:7], 16) + 1, folder)

    @property
    def cache_identity(self) -> dict[str, Any]:
        d = super().cache_identity
        if self.lora is not None:
            d["lora"] = {"path": str(self.lora[2]), "hash": self.adapter_hash}
        return d

    def engine(self) -> VLLMEngine:
        with _LOCK:
            if self.model not in _ENGINES:
                _ENGINES[self.model] = VLLMEngine(self.model)
            return _ENGINES[self.model]

    async def generate(self, request: ChatRequest) -> ChatResponse:
        resp = await asyncio.wrap_future(self.engine().submit(request, self.lora))
        resp.model = self.spec
        return resp

    def available(self) -> tuple[bool, str]:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            return False, "vllm not installed in this Python (see `make vllm-venv`; or use openai-compatible/ with its server)"
        return True, "ok"
