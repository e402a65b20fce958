"""Benchmark: choice scoring on the embedded model with and without prefix sharing.

The Director decides by choice scoring (``mascot_eval/systems/decide.py``): every decision is shown in
all cyclic rotations of its numbered option list, plus as many content-free calibration rows, so one
batch holds many rows that differ only in the option list at the end of a long prompt. The local
engine (``LocalEngine._run_choices``) computes each shared prefix once and only the rows' own
suffixes per row; its peer is one forward pass over the whole rows (``PREFIX_SHARING`` off), the
way it worked before.

Real batches, not synthetic ones: ``mascot-eval generate`` runs the MASCOT system on the demo task
(``--limit`` dialogues, fresh response cache) and every batch the engine's choice scorer received is
recorded (messages and parameters of each row). The recorded batches are then replayed through
``_run_choices`` in both modes, interleaved, ``--repeats`` times; CPU time (``time.process_time``: the
machine is shared) and wall time are summed over the batches, the median repeat is kept.

Writes ``benchmarks/results/choices.json``: ``choices_batches``, ``choices_rows``, ``choices_tokens``
(prompt tokens of all rows), ``shared_cpu_s`` / ``whole_cpu_s`` and their ratio
``prefix_sharing_speedup_cpu`` (and the same for wall time), ``max_abs_diff`` (largest difference of a
choice probability between the modes), the load average before and after, and the commit.

Run (about 4 minutes on 2 cores): ``.venv/bin/python benchmarks/bench_choices.py [--limit 1] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mascot_eval.backends import local  # noqa: E402
from mascot_eval.backends.base import ChatRequest  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "choices.json"


def record_batches(limit: int, tmp: Path) -> list[list[ChatRequest]]:
    """Run MASCOT on the demo task and keep every batch the choice scorer received."""
    from mascot_eval.backends.client import ClientSettings
    from mascot_eval.runs.rundir import RunDir
    from mascot_eval.systems.generate import generate
    from mascot_eval.taskspec import load_task

    batches: list[list[ChatRequest]] = []
    real = local.LocalEngine._run_choices

    def recording(self, jobs):  # type: ignore[no-untyped-def]
        batches.append([j.request for j in jobs])
        return real(self, jobs)

    local.LocalEngine._run_choices = recording  # type: ignore[method-assign]
    try:
        generate(
            RunDir(tmp / "run", create=True),
            [load_task("demo")],
            ["mascot"],
            model="embedded",
            limit=limit,
            settings=ClientSettings(use_cache=False, max_connections=32),
            seed=0,
            progress=False,
        )
    finally:
        local.LocalEngine._run_choices = real  # type: ignore[method-assign]
    return batches


def replay(engine, batches: list[list[ChatRequest]], sharing: bool) -> tuple[float, float, list]:  # type: ignore[no-untyped-def]
    local.PREFIX_SHARING = sharing
    cpu0, wall0 = time.process_time(), time.perf_counter()
    out = [engine._run_choices([local._Job(r, None) for r in batch]) for batch in batches]
    return time.process_time() - cpu0, time.perf_counter() - wall0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=1, help="demo dialogues whose Director batches are recorded")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    load_before = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory() as d:
        os.environ["MASCOT_RESPONSE_CACHE_DIR"] = str(Path(d) / "cache")
        batches = record_batches(args.limit, Path(d))
    engine = local.get_engine("embedded", "embedded", "embedded")
    engine.load()
    tok = engine.tokenizer
    times: dict[str, list[tuple[float, float]]] = {"shared": [], "whole": []}
    results: dict[str, list] = {}
    for rep in range(args.repeats):
        for mode in ("shared", "whole") if rep % 2 == 0 else ("whole", "shared"):
            cpu, wall, out = replay(engine, batches, mode == "shared")
            times[mode].append((cpu, wall))
            results[mode] = out
    local.PREFIX_SHARING = True
    diff = 0.0
    for bs, bw in zip(results["shared"], results["whole"]):
        for rs, rw in zip(bs, bw):
            for ps, pw in zip(rs.choice_probs, rw.choice_probs):
                diff = max(diff, *(abs(ps[k] - pw[k]) for k in ps))
    med = {m: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for m, v in times.items()}
    rows_marks = [[local.choice_row(tok, r) for r in b] for b in batches]
    groups = [len(local.shared_prefix_groups([r for r, _ in rm], [m for _, m in rm])) for rm in rows_marks]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "mascot_eval"], cwd=ROOT, capture_output=True, text=True).stdout)
    result = {
        "choices_batches": len(batches),
        "choices_rows": sum(len(b) for b in batches),
        "choices_prefix_groups": sum(groups),
        "choices_tokens": sum(len(r) for rm in rows_marks for r, _ in rm),
        "shared_cpu_s": round(med["shared"][0], 3),
        "whole_cpu_s": round(med["whole"][0], 3),
        "prefix_sharing_speedup_cpu": round(med["whole"][0] / med["shared"][0], 2),
        "shared_wall_s": round(med["shared"][1], 3),
        "whole_wall_s": round(med["whole"][1], 3),
        "prefix_sharing_speedup_wall": round(med["whole"][1] / med["shared"][1], 2),
        "max_abs_diff": diff,
        "repeats": args.repeats,
        "dialogues": args.limit,
        "torch_threads": int(os.environ.get("MASCOT_TORCH_THREADS", "0") or 0) or None,
        "cpus": os.cpu_count(),
        "load_average_1m_before": load_before,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "commit": commit + ("+dirty" if dirty else ""),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python", "benchmarks/bench_choices.py", *sys.argv[1:]]),
        "all_runs_cpu_wall_s": {m: [[round(c, 3), round(w, 3)] for c, w in v] for m, v in times.items()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
