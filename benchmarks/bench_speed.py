"""Benchmark: speed where users feel it (issue 18). Every figure is measured against its peer in the
same run, and written with flat numeric keys to ``benchmarks/results/speed.json``.

Self-BLEU (``selfbleu_*``): one group of 250, 500 and 1,000 distinct EmpatheticDialogues test
utterances (``MASCOT_DATA_DIR``; seed 0), every member against all the others. Ours
(:func:`mascot_eval.metrics.bleu.self_bleu_groups`, n-gram index included) against a plain nltk
``sentence_bleu`` loop on the same tokens. CPU time (``time.process_time``), because other jobs share
the machine: the nltk loop runs in slices with one run of ours before each (ours = median).
``selfbleu_<n>_seconds`` is ours, ``selfbleu_<n>_nltk_seconds`` the loop, ``selfbleu_1000_ratio_vs_nltk``
their ratio; ``selfbleu_2500_seconds`` and ``selfbleu_10000_seconds`` are ours alone (the nltk loop
would take hours) and ``selfbleu_growth_exponent`` the log-log slope of ours from 250 to 10,000 (1 = linear)
and ``selfbleu_max_abs_diff`` the largest difference from nltk over all sizes.

Agreement (``bootstrap_*``, ``alpha_continuous_*``): Krippendorff's alpha with a 1,000-replicate
bootstrap on 3 judges x 400 items of 1-5 scores (10 % missing), ours
(:func:`mascot_eval.judges.agreement.krippendorff_alpha`) against the naive loop: the
``krippendorff`` package on each replicate's resampled items (the same replicates), CPU time, best
of 5 (ours) and of 2 (the loop); ``*_interval_max_abs_diff`` compares the two intervals. Then 3 judges x
2,000 items of continuous ratings (about 6,000 distinct values): interval and ordinal alpha with
1,000 replicates, seconds and peak traced memory; the package needs a values x values array per item
there (``alpha_continuous_package_gib_needed``, computed, not attempted).

Generation (``generate_*``): 64 EmpatheticDialogues contexts (task ed-negative, 5 rounds, system
single-agent: 9 sequential model calls per dialogue: the agent in every round, the simulated user
from round 2) against a scripted OpenAI-compatible server in its own process that answers every
request after exactly 200 ms, with 32 connections, fresh response cache. Each run is a fresh
process. The floor is the critical path: max(calls of the longest dialogue, all calls / 32) x 200 ms;
``*_parallelism_vs_floor`` = floor / wall time of the generate phase (``agenerate`` from its start,
data loading and SDK import included, to its return); ``generate_call_phase_parallelism_vs_floor``
counts from the first call's start instead; ``generate_first_call_s`` is when the first call
started and ``generate_mean_in_flight`` the mean number of calls in flight (from a per-call trace
at the backend: each call's start and end). Peers in the same run, interleaved with ours, 3 runs
each (medians): a bare ``AsyncOpenAI`` + semaphore loop with the same dialogue shape
(``bare_openai_*``), and inspect_ai's model API with ``max_connections=32`` (``inspect_ai_*``) from a
separate throwaway venv given by ``--inspect-python`` (or ``MASCOT_BENCH_INSPECT_PYTHON``); when there
is none, ``notes.inspect_ai`` says why. ``--before-tree DIR`` (a checkout of an older commit) adds
the same generation run on that code (``generate_before_*``).

Resume (``resume_speedup``, ``main_job_*``; issue 18 points 1 and 5): the main job (`mascot-eval run`
with its defaults) cache-cold in a fresh process, then the same command again with nothing to do
(:func:`bench_resume`).

Run (about 3 minutes on an idle 2-core machine; other heavy jobs queue on the lock):
``flock /tmp/mascot-heavy.lock env MASCOT_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/bench_speed.py
--inspect-python /tmp/inspect-venv/bin/python``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "speed.json"

SELFBLEU_SIZES = (250, 500, 1000)
SELFBLEU_LARGE = (2500, 10000)  # ours only (nltk would take hours): the growth beyond 1,000
SELFBLEU_SLICES = 4
BOOT_ITEMS, BOOT_JUDGES, N_BOOT = 400, 3, 1000
CONT_ITEMS = 2000
GEN_DIALOGUES, GEN_ROUNDS, GEN_CONNECTIONS, GEN_LATENCY_S = 64, 5, 32, 0.2
GEN_CALLS = 2 * GEN_ROUNDS - 1  # the agent every round, the user from round 2 (round 1 is the ED opener)
GEN_REPEATS = int(os.environ.get("MASCOT_BENCH_GEN_REPEATS", "3"))
QUIET_LOAD, QUIET_WAIT_S = 1.5, 30  # generation waits (up to 30 s) for the 1-minute load average to drop below 1.5


# --------------------------------------------------------------------------------------------
# the scripted server (its own process): OpenAI chat completions, a fixed reply after a fixed delay


async def _serve(port: int, latency: float) -> None:
    served = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        try:
            while True:
                if not await reader.readline():
                    break
                length = 0
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                req = json.loads(await reader.readexactly(length) or b"{}")
                served += 1
                await asyncio.sleep(latency)
                text = f"I hear you. Tell me more about that, please ({served})."
                body = json.dumps(
                    {
                        "id": f"r{served}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": req.get("model", "m"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62},
                    }
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


class _Server:
    def __init__(self, latency: float) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.port), str(latency)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.v1 = f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


# --------------------------------------------------------------------------------------------
# generation workers (each in a fresh process; they print one JSON line)


def _worker_ours(v1: str) -> dict:
    sys.path.insert(0, os.getcwd())
    from mascot_eval.backends.client import ClientSettings, get_client
    from mascot_eval.runs.rundir import RunDir
    from mascot_eval.systems.generate import agenerate
    from mascot_eval.taskspec import load_task

    spec = f"openai-compatible/echo@{v1}"
    trace: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = ClientSettings(max_connections=GEN_CONNECTIONS, cache_dir=f"{tmp}/cache")
        client = get_client(spec, settings)
        inner = client.backend.generate

        async def traced(req):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            try:
                return await inner(req)
            finally:
                trace.append((t, time.perf_counter()))

        client.backend.generate = traced  # type: ignore[method-assign]
        task = load_task("ed-negative").model_copy(update={"rounds": GEN_ROUNDS})
        rundir = RunDir(Path(tmp) / "run", create=True)

        async def run() -> tuple[float, float, object]:
            t0 = time.perf_counter()
            res = await agenerate(
                rundir,
                [task],
                ["single-agent"],
                model=spec,
                limit=GEN_DIALOGUES,
                data_dir=os.environ.get("MASCOT_DATA_DIR"),
                settings=settings,
                progress=False,
            )
            return t0, time.perf_counter(), res

        c0 = time.process_time()
        t0, t1, res = asyncio.run(run())
        cpu = time.process_time() - c0
        per_dialogue = [
            sum(u.get("calls", 0) for u in (row.get("stats") or {}).get("usage", {}).values())
            for row in map(json.loads, rundir.transcripts_path.read_text().splitlines())
        ]
    return {
        "t0": t0,
        "t1": t1,
        "trace": trace,
        "per_dialogue_calls": per_dialogue,
        "cpu_s": cpu,
        "failed": res.failed,
        "dialogues": res.new,
    }  # type: ignore[attr-defined]


def _peer_dialogues(call) -> list[int]:  # type: ignore[no-untyped-def]
    """The dialogue shape of the peers: GEN_CALLS sequential calls, each on the growing history."""

    async def dialogue(d: int) -> int:
        history: list[str] = [f"I have been feeling down since my dog died last week (context {d})."]
        for k in range(GEN_CALLS):
            role = "the companion" if k % 2 == 0 else "the user"
            msgs = [
                {"role": "system", "content": f"You are {role} in a supportive conversation."},
                {"role": "user", "content": "Conversation so far:\n" + "\n".join(history[-8:]) + "\nWrite the next message."},
            ]
            history.append(await call(msgs))
        return len(history) - 1

    async def main() -> list[int]:
        return list(await asyncio.gather(*(dialogue(d) for d in range(GEN_DIALOGUES))))

    return asyncio.run(main())


def _worker_bare(v1: str) -> dict:
    t0 = time.perf_counter()
    c0 = time.process_time()
    import openai

    trace: list[tuple[float, float]] = []
    state: dict = {}

    async def call(msgs):  # type: ignore[no-untyped-def]
        if "client" not in state:
            state["client"] = openai.AsyncOpenAI(api_key="EMPTY", base_url=v1, max_retries=0, timeout=None)
            state["sem"] = asyncio.Semaphore(GEN_CONNECTIONS)
        async with state["sem"]:
            t = time.perf_counter()
            r = await state["client"].chat.completions.create(model="echo", messages=msgs, max_tokens=80, temperature=0.7)
            trace.append((t, time.perf_counter()))
        return r.choices[0].message.content

    per = _peer_dialogues(call)
    return {"t0": t0, "t1": time.perf_counter(), "trace": trace, "per_dialogue_calls": per, "cpu_s": time.process_time() - c0}


def _worker_inspect(v1: str) -> dict:
    t0 = time.perf_counter()
    c0 = time.process_time()
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model

    model = get_model(
        "openai-api/bench/echo",
        base_url=v1,
        api_key="EMPTY",
        config=GenerateConfig(max_connections=GEN_CONNECTIONS, max_tokens=80, temperature=0.7, max_retries=0),
    )

    async def call(msgs):  # type: ignore[no-untyped-def]
        out = await model.generate([ChatMessageSystem(content=msgs[0]["content"]), ChatMessageUser(content=msgs[1]["content"])])
        return out.completion

    per = _peer_dialogues(call)
    return {"t0": t0, "t1": time.perf_counter(), "trace": [], "per_dialogue_calls": per, "cpu_s": time.process_time() - c0}


def _run_worker(kind: str, v1: str, python: str, cwd: Path, extra_env: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(cwd), **(extra_env or {})}
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", kind, v1],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _gen_figures(r: dict) -> dict:
    per = r["per_dialogue_calls"]
    floor = max(max(per), sum(per) / GEN_CONNECTIONS) * GEN_LATENCY_S
    wall = r["t1"] - r["t0"]
    out = {"wall_s": wall, "floor_s": floor, "parallelism_vs_floor": floor / wall, "calls": sum(per), "cpu_s": r["cpu_s"]}
    trace = r["trace"]
    if trace:
        first = min(a for a, _ in trace)
        out["first_call_s"] = first - r["t0"]
        out["first_answer_s"] = min(b for _, b in trace) - r["t0"]
        out["call_phase_parallelism_vs_floor"] = floor / (max(b for _, b in trace) - first)
        out["mean_in_flight"] = sum(b - a for a, b in trace) / wall
        out["mean_call_s"] = sum(b - a for a, b in trace) / len(trace)
    return out


def bench_generate(inspect_python: str | None, before_tree: str | None, notes: dict) -> dict:
    kinds: list[tuple[str, str, str, Path]] = [
        ("ours", "ours", sys.executable, ROOT),
        ("bare_openai", "bare", sys.executable, ROOT),
    ]
    if before_tree:
        kinds.append(("before", "ours", sys.executable, Path(before_tree).resolve()))
    if inspect_python:
        probe = subprocess.run(
            [inspect_python, "-c", "import inspect_ai, sys; print(inspect_ai.__version__)"], capture_output=True, text=True
        )
        if probe.returncode == 0:
            kinds.append(("inspect_ai", "inspect", inspect_python, ROOT))
            notes["inspect_ai"] = f"inspect_ai {probe.stdout.strip()} from {inspect_python}"
        else:
            notes["inspect_ai"] = f"not measured: {inspect_python} cannot import inspect_ai ({probe.stderr.strip()[-200:]})"
    else:
        notes["inspect_ai"] = (
            "not measured: no --inspect-python given (install it into a separate venv: "
            "python -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect-ai openai)"
        )
    runs: dict[str, list[dict]] = {k[0]: [] for k in kinds}
    t_wait = time.monotonic()
    while os.getloadavg()[0] >= QUIET_LOAD and time.monotonic() - t_wait < QUIET_WAIT_S:
        time.sleep(5)
    quiet = {
        "generate_waited_for_quiet_s": round(time.monotonic() - t_wait, 1),
        "generate_load_average_1m_before": round(os.getloadavg()[0], 2),
    }
    server = _Server(GEN_LATENCY_S)
    try:
        for _ in range(GEN_REPEATS):  # interleaved, so every kind sees the same machine
            for name, worker, python, cwd in kinds:
                runs[name].append(_gen_figures(_run_worker(worker, server.v1, python, cwd)))
    finally:
        server.close()
    prefix = {"ours": "generate", "before": "generate_before", "bare_openai": "bare_openai", "inspect_ai": "inspect_ai"}
    out: dict = {**quiet, "generate_load_average_1m_after": round(os.getloadavg()[0], 2)}
    for name, figs in runs.items():
        for key in figs[0]:
            out[f"{prefix[name]}_{key}"] = round(statistics.median(f[key] for f in figs), 4)
        out[f"{prefix[name]}_parallelism_vs_floor_runs"] = [round(f["parallelism_vs_floor"], 4) for f in figs]
    out["generate_wall_ratio_vs_bare_openai"] = round(out["bare_openai_wall_s"] / out["generate_wall_s"], 3)
    if "inspect_ai" in runs:
        out["generate_wall_ratio_vs_inspect_ai"] = round(out["inspect_ai_wall_s"] / out["generate_wall_s"], 3)
    if "before" in runs:
        out["generate_wall_ratio_vs_before"] = round(out["generate_before_wall_s"] / out["generate_wall_s"], 3)
    out["generate_dialogues"], out["generate_connections"], out["generate_server_latency_s"] = (
        GEN_DIALOGUES,
        GEN_CONNECTIONS,
        GEN_LATENCY_S,
    )
    return out


# --------------------------------------------------------------------------------------------
# self-BLEU


def bench_selfbleu(data_dir: Path) -> dict:
    import random

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_metrics import read_ed

    from mascot_eval.metrics.bleu import nltk_sentence_bleu, self_bleu_groups
    from mascot_eval.metrics.tokenize import tokenize

    convs = read_ed(data_dir)
    pool = sorted({u for k in sorted(convs) for u in convs[k]})
    random.Random(0).shuffle(pool)
    out: dict = {}
    diff = 0.0
    nltk_sentence_bleu(["warm", "up"], [["warm", "up"]])  # nltk's import is not part of its loop
    for n in SELFBLEU_SIZES:
        toks = [tokenize(t) for t in pool[:n]]
        group = [list(range(n))]
        ours_cpu, ref = [], []
        nltk_cpu = 0.0
        bounds = [n * k // SELFBLEU_SLICES for k in range(SELFBLEU_SLICES + 1)]
        for k in range(SELFBLEU_SLICES):
            c0 = time.process_time()
            vals = self_bleu_groups(toks, group)[0]
            ours_cpu.append(time.process_time() - c0)
            c0 = time.process_time()
            ref += [nltk_sentence_bleu(toks[i], toks[:i] + toks[i + 1 :]) for i in range(bounds[k], bounds[k + 1])]
            nltk_cpu += time.process_time() - c0
        diff = max(diff, max(abs(a - b) for a, b in zip(vals, ref)))
        out[f"selfbleu_{n}_seconds"] = round(statistics.median(ours_cpu), 5)
        out[f"selfbleu_{n}_nltk_seconds"] = round(nltk_cpu, 3)
        out[f"selfbleu_{n}_ratio_vs_nltk"] = round(nltk_cpu / statistics.median(ours_cpu), 1)
        out[f"selfbleu_{n}_mean"] = round(float(sum(ref) / n), 6)
    out["selfbleu_max_abs_diff"] = float(diff)
    for n in SELFBLEU_LARGE:
        if n <= len(pool):
            toks = [tokenize(t) for t in pool[:n]]
            out[f"selfbleu_{n}_seconds"] = round(
                statistics.median(_cpu(lambda: self_bleu_groups(toks, [list(range(n))])) for _ in range(3)), 5
            )
    sizes = [n for n in (*SELFBLEU_SIZES, *SELFBLEU_LARGE) if f"selfbleu_{n}_seconds" in out]
    lo, hi = sizes[0], sizes[-1]
    out["selfbleu_growth_exponent"] = round(
        math.log(out[f"selfbleu_{hi}_seconds"] / out[f"selfbleu_{lo}_seconds"]) / math.log(hi / lo), 3
    )
    return out


def _cpu(fn) -> float:  # type: ignore[no-untyped-def]
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


# --------------------------------------------------------------------------------------------
# agreement


def _cpu_best(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def bench_agreement() -> dict:
    import tracemalloc

    import krippendorff
    import numpy as np

    from mascot_eval.judges.agreement import _replicate_items, krippendorff_alpha

    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, size=BOOT_ITEMS)
    m = np.vstack([np.clip(truth + rng.integers(-1, 2, size=BOOT_ITEMS), 1, 5) for _ in range(BOOT_JUDGES)]).astype(float)
    m[rng.random(m.shape) < 0.10] = np.nan
    m = m[:, (~np.isnan(m)).sum(axis=0) >= 2]
    out: dict = {"bootstrap_items": int(m.shape[1]), "bootstrap_replicates": N_BOOT}
    for level in ("interval", "ordinal"):
        ours = krippendorff_alpha(m, level, n_boot=N_BOOT, seed=0)
        t_ours = _cpu_best(lambda: krippendorff_alpha(m, level, n_boot=N_BOOT, seed=0), 5)
        idx = np.concatenate(list(_replicate_items(m.shape[1], N_BOOT, 0)))
        naive: list[float] = []

        def loop() -> None:
            naive.clear()
            naive.extend(krippendorff.alpha(reliability_data=m[:, i], level_of_measurement=level) for i in idx)

        t_naive = _cpu_best(loop, 2)
        lo, hi = np.quantile(np.asarray(naive), [0.025, 0.975])
        out[f"bootstrap_{level}_seconds"] = round(t_ours, 4)
        out[f"bootstrap_{level}_naive_seconds"] = round(t_naive, 3)
        out[f"bootstrap_{level}_ratio_vs_naive"] = round(t_naive / t_ours, 1)
        out[f"bootstrap_{level}_max_abs_diff"] = float(
            max(
                abs(ours[1] - lo),
                abs(ours[2] - hi),
                abs(ours[0] - krippendorff.alpha(reliability_data=m, level_of_measurement=level)),
            )
        )

    truth = rng.normal(0.0, 1.0, size=CONT_ITEMS)
    c = np.vstack([truth + rng.normal(0.0, 0.5, size=CONT_ITEMS) for _ in range(BOOT_JUDGES)])
    out["alpha_continuous_distinct_values"] = int(np.unique(c).size)
    for level in ("interval", "ordinal"):
        tracemalloc.start()
        t0 = time.perf_counter()
        v = krippendorff_alpha(c, level, n_boot=N_BOOT, seed=0)
        sec = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        key = "alpha_continuous" if level == "interval" else "alpha_continuous_ordinal"
        out[f"{key}_seconds"] = round(sec, 3)
        out[f"{key}_peak_mb"] = round(peak / 2**20, 1)
        out[f"{key}_value"] = round(v[0], 6)
    # the package builds an items x values x values array here; not called: at a few hundred items it
    # allocates gigabytes before failing, and then the kernel, not numpy, stops it
    out["alpha_continuous_package_gib_needed"] = round(CONT_ITEMS * out["alpha_continuous_distinct_values"] ** 2 * 8 / 2**30, 1)
    return out


# --------------------------------------------------------------------------------------------

_RESUME_WRAPPER = (
    "import sys, time, json; t0 = time.perf_counter()\n"
    "from mascot_eval.cli.main import main\n"
    "code = 0\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code if isinstance(e.code, int) else 0\n"
    "print('RESUME_BENCH ' + json.dumps({'code': code, 'seconds': time.perf_counter() - t0, "
    "'torch_imported': 'torch' in sys.modules}), file=sys.stderr)\n"
)


def _main_job(out: Path, cache: Path) -> dict:
    """The main job (`mascot-eval run`, its defaults: demo task, mascot, embedded model) into ``out``, in a
    fresh process with the response cache at ``cache``; wall time from process start."""
    env = {
        **os.environ,
        "MASCOT_RESPONSE_CACHE_DIR": str(cache),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", _RESUME_WRAPPER, "run", "--out", str(out), "--no-progress"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    line = next((ln for ln in p.stderr.splitlines() if ln.startswith("RESUME_BENCH ")), None)
    if line is None:
        raise RuntimeError(f"main job failed (exit {p.returncode}): {p.stderr[-2000:]}")
    info = json.loads(line.removeprefix("RESUME_BENCH "))
    if info["code"] != 0:
        raise RuntimeError(f"main job exited {info['code']}: {p.stderr[-2000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    steps = {k: v.get("status") for k, v in (manifest.get("steps") or {}).items()}
    return {"wall": wall, "torch_imported": info["torch_imported"], "steps": steps}


def bench_resume() -> dict:
    """Issue 18 points 1 and 5: the main job (`mascot-eval run` with its defaults, cache-cold: a fresh
    response cache; the embedded model's one-time conversion is kept) run once, then the same command
    again on the same run directory with nothing left to do. ``main_job_seconds`` is the first run's
    wall time (process start to exit), ``main_job_resume_seconds`` the rerun's, ``resume_speedup`` their
    ratio; ``resume_imports_torch`` is 1 when the resumed process imported torch (the target: 0);
    ``resume_steps_skipped`` counts the steps the rerun's manifest records as skipped."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        first = _main_job(tmp / "run", tmp / "cache")
        again = _main_job(tmp / "run", tmp / "cache")
    return {
        "main_job_seconds": round(first["wall"], 2),
        "main_job_resume_seconds": round(again["wall"], 2),
        "resume_speedup": round(first["wall"] / again["wall"], 2),
        "resume_imports_torch": int(bool(again["torch_imported"])),
        "resume_steps_skipped": sum(1 for v in again["steps"].values() if v == "skipped"),
        "resume_steps": len(again["steps"]),
    }


def _commit() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inspect-python", default=os.environ.get("MASCOT_BENCH_INSPECT_PYTHON"))
    ap.add_argument("--before-tree", default=None, help="a checkout of an older commit: its generation is measured too")
    ap.add_argument("--only", default="selfbleu,agreement,generate,resume")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from mascot_eval import paths
    from mascot_eval.fileio import atomic_write_json

    parts = set(args.only.split(","))
    notes: dict = {}
    result: dict = {"load_average_1m_before": round(os.getloadavg()[0], 2)}
    t0 = time.perf_counter()
    if "selfbleu" in parts:
        result.update(bench_selfbleu(paths.data_dir(required=True)))
    if "agreement" in parts:
        result.update(bench_agreement())
    if "generate" in parts:
        result.update(bench_generate(args.inspect_python, args.before_tree, notes))
    if "resume" in parts:
        result.update(bench_resume())
        if "resume_speedup" not in result:
            notes["resume_speedup"] = "not measured yet (issue 18 point 1)"
    result["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    result["total_seconds"] = round(time.perf_counter() - t0, 1)
    result["cpus"] = os.cpu_count()
    result.update(_commit())
    result["date_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["command"] = " ".join([Path(sys.executable).name, "benchmarks/bench_speed.py", *sys.argv[1:]])
    result["notes"] = notes
    result["targets"] = {
        "selfbleu_1000_ratio_vs_nltk": ">= 100",
        "selfbleu_max_abs_diff": "<= 1e-12",
        "selfbleu_growth_exponent": "about 1",
        "bootstrap_interval_ratio_vs_naive": ">= 20",
        "generate_parallelism_vs_floor": ">= 0.8",
        "resume_speedup": ">= 20",
        "main_job_resume_seconds": "< 5",
        "main_job_seconds": "< 180",
        "resume_imports_torch": "0",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(args.out), result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--serve":
        asyncio.run(_serve(int(sys.argv[2]), float(sys.argv[3])))
    elif len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        fn = {"ours": _worker_ours, "bare": _worker_bare, "inspect": _worker_inspect}[sys.argv[2]]
        print(json.dumps(fn(sys.argv[3])))
    else:
        main()
