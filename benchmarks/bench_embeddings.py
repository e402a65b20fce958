"""Benchmark: the own MiniLM forward pass (``benchmarks/minilm_lean.py``, formerly
``mascot_eval.metrics.minilm``) vs sentence-transformers as the package runs it.

Decides issue 19's rule: embeddings go through sentence-transformers unless the own forward pass
is >= 2x faster at identical vectors (max abs diff <= 1e-5, float32). Both embed the same texts
(the first ``N_TEXTS`` distinct utterances of the EmpatheticDialogues test CSV in
``MASCOT_DATA_DIR``, in file order) on the same 2 CPU threads:

- ``own``: ``MiniLMEncoder.encode`` as the project ran it (``workers=2`` chunks at once, one torch
  thread each), plus ``own_1worker`` (one chunk at a time, 2 torch threads);
- ``st``: ``SentenceTransformer.encode(normalize_embeddings=True)`` with 2 torch threads, at the
  default batch size 32 (exactly the package's encoder, ``mascot_eval.metrics.embeddings._Encoder``)
  and at 128 (the faster of the two is the peer);
- float32 (the deciding comparison) and bfloat16 weights (the project's ``auto`` choice on CPUs
  with AVX512-BF16/AMX; informational, never "identical").

Each configuration is warmed once, then the configurations run ``REPEATS`` rounds, interleaved and
in rotated order, so all see the same (shared, fluctuating) machine; texts/s is the median over the
rounds (wall clock; CPU seconds recorded too). Cold model load (fresh interpreter: imports + model
construction + one short text) is measured separately in subprocesses, alternating.

Writes ``benchmarks/results/embeddings.json``. Run under the heavy-job lock:
``flock /tmp/mascot-heavy.lock env MASCOT_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/bench_embeddings.py``
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

N_TEXTS = int(os.environ.get("BENCH_EMBED_TEXTS", "2000"))
REPEATS = int(os.environ.get("BENCH_EMBED_REPEATS", "5"))
COLD_REPEATS = 3
THREADS = 2
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "embeddings.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

COLD = {
    "own": "from minilm_lean import MiniLMEncoder as M; m = M(d, 'float32'); m.encode(['warm up'])",
    "st": "from mascot_eval.metrics.embeddings import _Encoder as E; m = E('float32'); m.encode(['warm up'])",
}


def cold_load_seconds(kind: str) -> float:
    code = (
        "import time; t0 = time.perf_counter(); import torch; torch.set_num_threads(%d);"
        "from mascot_eval.metrics.embeddings import model_dir; d = model_dir(); %s;"
        "print(time.perf_counter() - t0)"
    ) % (THREADS, COLD[kind])
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])},
    )
    return float(out.stdout.strip().splitlines()[-1])


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "mascot_eval", "benchmarks/bench_embeddings.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    import numpy as np

    from bench_metrics import read_ed
    from mascot_eval import paths

    data_dir = paths.data_dir(required=True)
    assert data_dir is not None
    seen: dict[str, None] = {}
    for conv in read_ed(data_dir).values():
        for u in conv:
            seen.setdefault(u, None)
    texts = list(seen)[:N_TEXTS]

    load_start = [round(x, 2) for x in os.getloadavg()]
    cold: dict[str, list[float]] = {"own": [], "st": []}
    for _ in range(COLD_REPEATS):
        for kind in ("own", "st"):
            cold[kind].append(cold_load_seconds(kind))

    import torch

    from minilm_lean import MiniLMEncoder

    from mascot_eval.metrics.embeddings import _Encoder, model_dir

    torch.set_num_threads(THREADS)
    d = model_dir()
    own = {dt: MiniLMEncoder(d, dt) for dt in ("float32", "bfloat16")}
    package = {dt: _Encoder(dt) for dt in ("float32", "bfloat16")}  # batch 32, MASCOT_EMBED_THREADS torch threads
    os.environ["MASCOT_EMBED_THREADS"] = str(THREADS)
    st32 = package["float32"].model
    n_tokens = sum(len(x) for x in own["float32"].token_ids(texts))

    def own_run(dt: str, workers: int):  # type: ignore[no-untyped-def]
        def run() -> Any:
            torch.set_num_threads(1 if workers > 1 else THREADS)
            try:
                return own[dt].encode(texts, workers=workers)
            finally:
                torch.set_num_threads(THREADS)

        return run

    def st_run(model: Any, batch: int):  # type: ignore[no-untyped-def]
        def run() -> Any:
            return model.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)

        return run

    configs = {
        "own_float32": own_run("float32", THREADS),
        "own_1worker_float32": own_run("float32", 1),
        "st_float32_batch32": lambda: package["float32"].encode(texts),
        "st_float32_batch128": st_run(st32, 128),
        "own_bfloat16": own_run("bfloat16", THREADS),
        "st_bfloat16_batch32": lambda: package["bfloat16"].encode(texts),
    }
    vectors = {name: fn() for name, fn in configs.items()}  # warm-up, and the vectors compared
    wall: dict[str, list[float]] = {k: [] for k in configs}
    cpu: dict[str, list[float]] = {k: [] for k in configs}
    names = list(configs)
    for r in range(REPEATS):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            configs[name]()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)

    def tps(name: str) -> float:
        return round(len(texts) / statistics.median(wall[name]), 1)

    def diff(a: str, b: str) -> float:
        return float(np.abs(vectors[a] - vectors[b]).max())

    def min_cos(a: str, b: str) -> float:
        return float((vectors[a] * vectors[b]).sum(1).min())

    st_peer = max(("st_float32_batch32", "st_float32_batch128"), key=tps)
    speedup = round(tps("own_float32") / tps(st_peer), 2)
    max_abs = diff("own_float32", st_peer)
    keep_own = speedup >= 2.0 and max_abs <= 1e-5
    result: dict[str, Any] = {
        "texts": len(texts),
        "tokens": n_tokens,
        "threads": THREADS,
        "repeats": REPEATS,
        "texts_per_second": {k: tps(k) for k in configs},
        "wall_seconds_median": {k: round(statistics.median(v), 3) for k, v in wall.items()},
        "cpu_seconds_median": {k: round(statistics.median(v), 3) for k, v in cpu.items()},
        "wall_seconds_all": {k: [round(x, 3) for x in v] for k, v in wall.items()},
        "own_texts_per_second": tps("own_float32"),
        "st_texts_per_second": tps(st_peer),
        "st_peer": st_peer,
        "speedup_own_vs_st_float32": speedup,
        "speedup_own_vs_st_bfloat16": round(tps("own_bfloat16") / tps("st_bfloat16_batch32"), 2),
        "max_abs_diff_float32": max_abs,
        "max_abs_diff_float32_st_batch32_vs_128": diff("st_float32_batch32", "st_float32_batch128"),
        "max_abs_diff_bfloat16_own_vs_st": diff("own_bfloat16", "st_bfloat16_batch32"),
        "min_cosine_bfloat16_vs_st_float32": {
            "own": min_cos("own_bfloat16", st_peer),
            "st": min_cos("st_bfloat16_batch32", st_peer),
        },
        "cold_load_seconds": {k: [round(x, 2) for x in v] for k, v in cold.items()},
        "cold_load_seconds_median": {k: round(statistics.median(v), 2) for k, v in cold.items()},
        "rule": "keep the own forward pass only if speedup_own_vs_st_float32 >= 2 and max_abs_diff_float32 <= 1e-5",
        "decision": "own forward pass" if keep_own else "sentence-transformers",
        "versions": {
            "torch": torch.__version__,
            "sentence_transformers": __import__("sentence_transformers").__version__,
            "transformers": __import__("transformers").__version__,
            "python": platform.python_version(),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)),
            "bf16_cpu_flags": any(f in Path("/proc/cpuinfo").read_text() for f in (" amx_bf16", " avx512_bf16")),
            "load_average_start": load_start,
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
        },
        "package_embeddings": __import__("mascot_eval.metrics.embeddings", fromlist=["x"]).embedding_info(),
        "commit": git_commit(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    from mascot_eval.fileio import atomic_write_json

    atomic_write_json(OUT, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
