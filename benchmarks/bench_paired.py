"""Benchmark: how much the paired design shrinks the noise of a system-vs-itself comparison.

One system under two names (``twin-a``, ``twin-b``: the same zero-shot config, so every real
difference between them is zero) is run on the ED (``ed-positive``) and QMSum (``qmsum-product``)
tasks with the embedded SmolLM2 model, twice in the same process:

* ``before``: the seeding as it was before issue 20, reproduced by patching: user calls seeded by the
  dialogue id (which includes the system), the opener generated per system, and local sampling drawn
  from one random stream per batch (so a row's sample depends on its batch mates);
* ``after``: the code as it is: the opener is one shared call per (context, profile), user calls are
  seeded without the system, and each sampled request has its own random stream.

Measures: three dialogue-level metrics (agent tokens, distinct-2, ROUGE-L echo of the user) and the
`local` judge's group-level scores (logprob mode on the same model). For each, the paired difference twin-a - twin-b per context gets its cluster-
bootstrap standard error (the one `mascot-eval regress` uses); the JSON records it before and after,
their ratio (after / before; below 1 = the design removed noise), the per-context standard deviation
and the share of contexts whose user turns are byte-identical between the twins. Agents keep their
own per-dialogue seeds in both modes, so the twins' agent replies still differ: that is the noise a
real comparison has to live with.

With ``--greedy-agents`` the agents decode greedily, so a twin pair differs only through the user side
(the opener, the user's sampled turns) and the sampling streams: the part of the noise the paired
design is meant to remove, measured on its own (stored under ``greedy_agents``, beside the sampled figures).

Writes ``benchmarks/results/paired.json``. Run (a few minutes on 2 cores; wrap in flock on a shared
machine): ``.venv/bin/python benchmarks/bench_paired.py [--limit 8] [--rounds 2] [--no-judge]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mascot_eval.backends import local  # noqa: E402
from mascot_eval.backends.client import ClientSettings  # noqa: E402
from mascot_eval.fileio import stable_hash  # noqa: E402
from mascot_eval.runs.rundir import RunDir  # noqa: E402
from mascot_eval.runs.tables import ALL_JUDGES, load_runs  # noqa: E402
from mascot_eval.stats.compare import dialogue_values  # noqa: E402
from mascot_eval.stats.noninferiority import gate_bound  # noqa: E402
from mascot_eval.systems import base as sys_base  # noqa: E402
from mascot_eval.systems import user_sim  # noqa: E402

TASKS = ("ed-positive", "qmsum-product")
METRICS = ["dialogue_agent_tokens", "distinct_2", "echo_user_rougeL"]
SYSTEMS = ("twin-a", "twin-b")


def _legacy_call_seed(self, role: str, index: int = 0) -> int:
    """The call seed before issue 20: every role, the user's included, seeded by the dialogue id."""
    return int(stable_hash([self.seed, self.dialogue_id, self.round, len(self.turns), role, index], 8), 16)


def _legacy_sampler(seeds, sampled):
    """Local sampling before issue 20: one random stream for the whole batch, seeded by its composition."""
    import torch

    g = torch.Generator().manual_seed(hash(tuple(sorted((s or 0, i) for s, i in seeds))) & 0x7FFFFFFF)
    return local._gumbel([g if on else None for on in sampled])


async def _unshared(self, key, make):
    return await make(), True


class legacy:
    """Context manager: the seeding and sharing as before issue 20."""

    def __enter__(self):
        self.saved = (sys_base.DialogueState.call_seed, local._row_sampler, user_sim.SharedTurns.get)
        sys_base.DialogueState.call_seed = _legacy_call_seed
        local._row_sampler = _legacy_sampler
        user_sim.SharedTurns.get = _unshared
        return self

    def __exit__(self, *exc):
        sys_base.DialogueState.call_seed, local._row_sampler, user_sim.SharedTurns.get = self.saved


def _systems(tmp: Path, max_tokens: int, greedy: bool = False) -> list[str]:
    src = (REPO / "baselines" / "zero-shot.yaml").read_text()
    assert "temperature: 0.7" in src and "max_tokens: 80" in src
    if greedy:
        src = src.replace("temperature: 0.7", "temperature: 0.0")
    out = []
    for name in SYSTEMS:
        p = tmp / f"{name}.yaml"
        p.write_text(src.replace("name: zero-shot", f"name: {name}").replace("max_tokens: 80", f"max_tokens: {max_tokens}"))
        out.append(str(p))
    return out


def _one(mode: str, task_name: str, tmp: Path, systems: list[str], args) -> dict:
    from mascot_eval.judges.run import judge_rundir
    from mascot_eval.metrics.compute import compute_rundir
    from mascot_eval.systems.generate import generate
    from mascot_eval.taskspec import load_task

    task = load_task(task_name).model_copy(update={"rounds": args.rounds})
    rd = RunDir(tmp / f"{task_name}-{mode}", create=True)
    settings = ClientSettings(use_cache=False, max_connections=16)
    t0 = time.perf_counter()
    res = generate(
        rd,
        [task],
        systems,
        model="embedded",
        limit=args.limit,
        data_dir=os.environ.get("MASCOT_DATA_DIR"),
        settings=settings,
        seed=args.seed,
        progress=False,
    )
    t_gen = time.perf_counter() - t0
    compute_rundir(rd, METRICS)
    t_judge = 0.0
    if args.judge:
        t1 = time.perf_counter()
        judge_rundir(rd, "local", settings=settings, levels=("group",), progress=False)
        t_judge = time.perf_counter() - t1
    data = load_runs([rd])
    dv = dialogue_values(data.units, ALL_JUDGES)
    a, b = SYSTEMS
    out: dict = {
        "dialogues": res.new,
        "failed": res.failed,
        "generate_s": round(t_gen, 1),
        "judge_s": round(t_judge, 1),
        "measures": {},
    }
    for measure in sorted(set(dv["measure"])):
        sel = dv[dv["measure"] == measure]
        va, vb = sel[sel["label"] == a].set_index("pair_key"), sel[sel["label"] == b].set_index("pair_key")
        keys = va.index.intersection(vb.index)
        d = va.loc[keys, "value"].to_numpy(float) - vb.loc[keys, "value"].to_numpy(float)
        bound = gate_bound(d, va.loc[keys, "cluster"].tolist(), alpha=0.05, n_boot=4000, seed=1)
        out["measures"][measure] = {
            "n": bound.n,
            "mean_diff": round(bound.diff, 5),
            "se": round(bound.se, 5),
            "sd": round(bound.sd, 5),
        }
    by_pair: dict[str, dict[str, list[str]]] = {}
    for _, t in data.transcripts:
        by_pair.setdefault(t.pair_key, {})[t.system] = [x.text for x in t.turns if x.is_user]
    pairs = [v for v in by_pair.values() if len(v) == 2]
    out["openers_identical"] = sum(v[a][:1] == v[b][:1] for v in pairs) / max(len(pairs), 1)
    out["user_turns_identical"] = sum(v[a] == v[b] for v in pairs) / max(len(pairs), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=8, help="contexts per task")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32, help="agent reply length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-judge", dest="judge", action="store_false", help="skip the local judge (group level)")
    ap.add_argument(
        "--greedy-agents",
        action="store_true",
        help="agents decode greedily (temperature 0), so the twins differ only by what the user side and the "
        "sampling streams give them; stored under 'greedy_agents' in the existing JSON (the sampled figures are kept)",
    )
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "paired.json"))
    args = ap.parse_args()
    os.environ.setdefault("MASCOT_TORCH_THREADS", str(os.cpu_count() or 1))
    started = time.time()
    result: dict = {
        "benchmark": "paired",
        "description": __doc__.split("\n\n")[1].replace("\n", " "),
        "settings": {
            "tasks": list(TASKS),
            "systems": list(SYSTEMS),
            "base_system": "zero-shot",
            "limit": args.limit,
            "rounds": args.rounds,
            "agent_max_tokens": args.max_tokens,
            "seed": args.seed,
            "judge": "local (group level)" if args.judge else None,
            "metrics": METRICS,
            "model": "embedded (SmolLM2-135M)",
            "se": "cluster bootstrap over contexts, 4000 replicates",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_before": os.getloadavg(),
        },
        "tasks": {},
    }
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        systems = _systems(tmp, args.max_tokens, greedy=args.greedy_agents)
        for task in TASKS:
            entry = {}
            with legacy():
                entry["before"] = _one("before", task, tmp, systems, args)
            entry["after"] = _one("after", task, tmp, systems, args)
            entry["se_ratio_after_over_before"] = {
                m: (
                    round(entry["after"]["measures"][m]["se"] / entry["before"]["measures"][m]["se"], 4)
                    if entry["before"]["measures"].get(m, {}).get("se")
                    else None
                )
                for m in entry["after"]["measures"]
            }
            result["tasks"][task] = entry
            print(
                task,
                json.dumps(entry["se_ratio_after_over_before"]),
                "openers identical before/after:",
                entry["before"]["openers_identical"],
                entry["after"]["openers_identical"],
                flush=True,
            )
    result["seconds"] = round(time.time() - started, 1)
    result["machine"]["load_after"] = os.getloadavg()
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if args.greedy_agents:
        result["settings"]["agent_temperature"] = 0.0
        kept = json.loads(out_path.read_text()) if out_path.exists() else {"benchmark": "paired"}
        kept["greedy_agents"] = result
        result = kept
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out} in {round(time.time() - started, 1)} s")


if __name__ == "__main__":
    main()
