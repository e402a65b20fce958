"""Benchmark: all metrics on 2,000 dialogues (3 agents, 4 rounds) built from real utterances.

Dialogues are assembled from the EmpatheticDialogues test CSV in ``MASCOT_DATA_DIR``: each
dialogue's 4 user turns are the utterances of one ED conversation (in order, cycling through the
conversations) and each of the 3 agents' replies is an ED utterance drawn at random (seed 0) from
the whole file. Half the dialogues belong to system "sys-a", half to "sys-b".

Measures and writes ``benchmarks/results/metrics.json``:
- ``selfbleu_speedup``: CPU time of a plain nltk ``sentence_bleu`` loop over every inter-agent
  self-BLEU job divided by ours (n-gram index + vectorised BLEU, same tokens). The nltk loop runs
  in 8 slices with one full run of ours before each slice (ours = median of those 8 runs), so both
  are timed under the same conditions; CPU time (``time.process_time``) is used because other jobs
  share this machine and wall-clock ratios swing with their load. Wall-clock figures are recorded
  too (``selfbleu_wall_*``);
- ``selfbleu_max_abs_diff``: largest absolute difference between the two over all jobs;
- ``all_metrics_seconds``: wall time of ``compute()`` with every registered metric, starting with a
  cold embedding cache and torch not yet imported (model load included); ``all_metrics_cpu_seconds``
  is the process CPU time of the same call (all threads), and ``machine.load_average_*`` the
  1-minute load average before and after it (2.0 = both cores busy with other work);
- ``peak_rss_mb``: peak resident memory of the process up to the end of that ``compute()`` call
  (``peak_rss_mb_whole_benchmark``: at the end, after the warm-cache run and the nltk loop).

Run: ``MASCOT_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/bench_metrics.py``
"""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

N_DIALOGUES = 2000
SLICES = 8
ROUNDS = 4
AGENTS = ["Anchor", "Catalyst", "Beacon"]
OUT = Path(__file__).resolve().parent / "results" / "metrics.json"


def read_ed(data_dir: Path) -> dict[str, list[str]]:
    """ED test conversations: conv_id -> utterances in order (ParlAI-style line split, fields 0-7)."""
    convs: dict[str, list[tuple[int, str]]] = {}
    with open(data_dir / "empathetic_dialogues" / "test.csv", encoding="utf-8", newline="") as fh:
        next(fh)
        for line in fh:
            f = line.strip().split(",")
            if len(f) < 8:
                continue
            try:
                idx = int(f[1])
            except ValueError:
                continue
            text = f[5].replace("_comma_", ",").strip()
            if text:
                convs.setdefault(f[0], []).append((idx, text))
    return {k: [t for _, t in sorted(v)] for k, v in convs.items()}


def build(data_dir: Path):  # type: ignore[no-untyped-def]
    from mascot_eval.transcript import Transcript, Turn

    convs = read_ed(data_dir)
    ids = sorted(convs)
    pool = [u for k in ids for u in convs[k]]
    rng = random.Random(0)
    out = []
    for d in range(N_DIALOGUES):
        conv = convs[ids[d % len(ids)]]
        users = (conv * ROUNDS)[:ROUNDS]
        turns = []
        for r in range(1, ROUNDS + 1):
            turns.append(Turn(r, "user", users[r - 1]))
            for a in AGENTS:
                turns.append(Turn(r, a, rng.choice(pool)))
        system = "sys-a" if d % 2 == 0 else "sys-b"
        cid = f"{ids[d % len(ids)]}#{d}"
        out.append(
            Transcript(
                dialogue_id=f"ed-bench:{cid}:-:{system}",
                task="ed-bench",
                task_version="1",
                split="in_domain",
                domain="emotional",
                context_id=cid,
                system=system,
                system_config_hash="bench",
                persona_group="emotional",
                agents=list(AGENTS),
                turns=turns,
            )
        )
    return out, len(pool)


def main() -> None:
    from mascot_eval import paths

    data_dir = paths.data_dir(required=True)
    assert data_dir is not None
    transcripts, pool_size = build(data_dir)
    assert "torch" not in sys.modules
    result: dict = {
        "dialogues": len(transcripts),
        "agents": len(AGENTS),
        "rounds": ROUNDS,
        "turns": sum(len(t.turns) for t in transcripts),
        "utterance_pool": pool_size,
        "unique_texts": len({x.text for t in transcripts for x in t.turns}),
    }

    from mascot_eval.metrics import METRICS
    from mascot_eval.metrics.compute import compute

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MASCOT_CACHE_DIR"] = cache  # cold embedding cache
        timings: dict[str, float] = {}
        t0, c0 = time.perf_counter(), time.process_time()
        df = compute(transcripts, timings=timings)
        result["all_metrics_seconds"] = round(time.perf_counter() - t0, 3)
        result["all_metrics_cpu_seconds"] = round(time.process_time() - c0, 3)
        load_after = os.getloadavg()[0]
        result["metric_seconds"] = {k: round(v, 3) for k, v in sorted(timings.items(), key=lambda kv: -kv[1])}
        result["metrics"] = len(METRICS.names())
        result["rows"] = int(len(df))
        result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        del df
        t0 = time.perf_counter()
        compute(transcripts)  # embeddings now come from the cache (new context, same process)
        result["all_metrics_seconds_warm_cache"] = round(time.perf_counter() - t0, 3)
    from mascot_eval.metrics.embeddings import embedding_info

    result["embeddings"] = embedding_info()

    # self-BLEU: ours vs a straightforward nltk loop on identical tokens and jobs
    from mascot_eval.metrics.bleu import bleu_jobs, nltk_sentence_bleu
    from mascot_eval.metrics.ngrams import NgramIndex
    from mascot_eval.metrics.tokenize import tokenize

    texts: dict[str, int] = {}
    jobs_h, jobs_r = [], []
    for t in transcripts:
        for _, turns in sorted(t.rounds().items()):
            ids = [texts.setdefault(x.text, len(texts)) for x in turns if not x.is_user]
            for i in range(len(ids)):
                jobs_h.append(ids[i])
                jobs_r.append(ids[:i] + ids[i + 1 :])
    tokens = [tokenize(x) for x in texts]
    # Interleaved: the nltk loop runs in SLICES parts, and before each part our whole computation
    # runs once, so both see the same (shared, fluctuating) machine; ours = the median of its runs.
    ours_cpu, ours_wall = [], []
    nltk_cpu = nltk_wall = 0.0
    ref: list[float] = []
    bounds = [len(jobs_h) * k // SLICES for k in range(SLICES + 1)]
    for k in range(SLICES):
        t0, c0 = time.perf_counter(), time.process_time()
        ours = bleu_jobs(NgramIndex(tokens, max_n=4), jobs_h, jobs_r)
        ours_cpu.append(time.process_time() - c0)
        ours_wall.append(time.perf_counter() - t0)
        t0, c0 = time.perf_counter(), time.process_time()
        ref += [
            nltk_sentence_bleu(tokens[h], [tokens[r] for r in rs])
            for h, rs in zip(jobs_h[bounds[k] : bounds[k + 1]], jobs_r[bounds[k] : bounds[k + 1]])
        ]
        nltk_cpu += time.process_time() - c0
        nltk_wall += time.perf_counter() - t0
    med_cpu, med_wall = statistics.median(ours_cpu), statistics.median(ours_wall)
    result["selfbleu_jobs"] = len(jobs_h)
    result["selfbleu_cpu_seconds_ours"] = round(med_cpu, 4)
    result["selfbleu_cpu_seconds_nltk"] = round(nltk_cpu, 3)
    result["selfbleu_speedup"] = round(nltk_cpu / med_cpu, 1)
    result["selfbleu_wall_seconds_ours"] = round(med_wall, 4)
    result["selfbleu_wall_seconds_nltk"] = round(nltk_wall, 3)
    result["selfbleu_wall_speedup"] = round(nltk_wall / med_wall, 1)
    result["selfbleu_max_abs_diff"] = float(max(abs(a - b) for a, b in zip(ours, ref)))
    result["selfbleu_mean"] = float(sum(ref) / len(ref))

    result["peak_rss_mb_whole_benchmark"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["machine"] = {
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "load_average_before_metrics": round(load_before, 2),
        "load_average_after_metrics": round(load_after, 2),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    result["targets"] = {
        "selfbleu_speedup": ">= 20",
        "selfbleu_max_abs_diff": "<= 1e-9",
        "all_metrics_seconds": "< 60",
        "peak_rss_mb": "< 2000",
    }
    result["date_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    from mascot_eval.fileio import atomic_write_json

    atomic_write_json(OUT, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
