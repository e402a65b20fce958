"""Three-way comparisons: a judge sees three anonymised transcripts of the same context and names the best.

Position bias is controlled by asking every order: all 6 permutations by default, or the 3 cyclic
rotations (each system once in each position) as a cheaper option. Labels (A, B, C) are mapped back
to systems in every row. :func:`summarize_comparisons` reports, with bootstrap intervals over
contexts: win / tie / loss rate per system, each judge's pick rate per position (first-position
bias; 1/3 is no bias), how often the orders of one context disagree, the majority verdict per
context, and a Bradley-Terry ranking (ties count half a win to each side).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..aio import run_all, run_sync
from ..backends.client import ClientSettings
from ..errors import UserError
from ..runs.rundir import RunDir
from ..stats.bootstrap import bootstrap_mean
from ..transcript import Transcript
from . import prompts
from .parse import parse_choice
from .score import Judge
from .specs import JudgeSpec, parse_judges

from ..records.comparison import SCHEMA

LABELS = ("A", "B", "C")


def _now() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


ORDER_MODES = ("all", "rotations")


def orders(mode: str = "all") -> list[tuple[int, int, int]]:
    """Index orders: the 6 permutations ("all") or the 3 cyclic rotations ("rotations")."""
    if mode == "all":
        return list(itertools.permutations(range(3), 3))
    if mode == "rotations":
        return [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    raise UserError(f"--orders: '{mode}' is not one of {', '.join(ORDER_MODES)}")


def choice_schema() -> dict[str, Any]:
    return {
        "name": "judge_choice",
        "type": "object",
        "properties": {
            "rationale": {"type": "string"},
            "best": {"type": "string", "enum": [*LABELS, "tie"]},
            "ranking": {"type": "array", "items": {"type": "string", "enum": list(LABELS)}},
        },
        "required": ["rationale", "best", "ranking"],
        "additionalProperties": False,
    }


def map_back(order_systems: list[str], best_label: str, ranking: list[str] | None) -> dict[str, Any]:
    """Labels -> systems: ``order_systems[i]`` was shown as ``LABELS[i]``."""
    lab = dict(zip(LABELS, order_systems))
    if best_label == "tie":
        return {"best_label": "tie", "best_position": None, "best_system": None, "tie": True, "ranking_systems": None}
    return {
        "best_label": best_label,
        "best_position": LABELS.index(best_label) + 1,
        "best_system": lab[best_label],
        "tie": False,
        "ranking_systems": [lab[x] for x in ranking] if ranking else None,
    }


async def compare_one(judge: Judge, trio: list[Transcript], order: tuple[int, int, int], order_index: int) -> dict[str, Any]:
    """Ask ``judge`` about ``trio`` shown in ``order``; one comparison row."""
    shown = [trio[i] for i in order]
    first = trio[0]
    prompt = judge.render(
        judge.spec.templates.threeway,
        ["threeway", first.pair_key, *[prompts.dialogue_text(t) for t in shown]],
        labels=list(LABELS),
        situation=prompts.situation_text(first.context),
        dialogues=[(lab, _anonymous_text(t)) for lab, t in zip(LABELS, shown)],
    )
    if judge.spec.mode == "logprob":  # the best label's probability after '"best": "'; ranking by probability
        asked = await judge.ask_probs(prompt, ('{"rationale": "", "best": "',), tuple(LABELS))
        if asked.parsed.ok:
            assert asked.parsed.obj is not None  # ask_probs sets obj on every answer that parsed
            p = asked.parsed.obj["probs"][0]
            ranking = sorted(LABELS, key=lambda lab: -p[lab])
            asked.parsed.obj = {"best": ranking[0], "ranking": ranking, "probs": p}
    else:
        asked = await judge.ask_with(prompt, lambda text, s: parse_choice(text, LABELS, shown=s), choice_schema())
    row: dict[str, Any] = {
        "schema": SCHEMA,
        "pair_key": first.pair_key,
        "task": first.task,
        "split": first.split,
        "domain": first.domain,
        "context_id": first.context_id,
        "judge": judge.spec.name,
        "judge_model": judge.spec.model,
        "systems": sorted(t.system for t in trio),
        "order": [t.system for t in shown],
        "order_index": order_index,
        "dialogue_ids": [t.dialogue_id for t in shown],
        "status": "scored"
        if asked.parsed.ok
        else ("call_failed" if (asked.reason or "").startswith("call_failed") else "unscored"),
        "reason": None if asked.parsed.ok else asked.reason,
        "rationale": asked.parsed.rationale if asked.parsed.ok else None,
        "usage": asked.usage,
        "call_id": asked.call_id,
        "spec_hash": judge.spec_hash,
        "template_hash": judge.template_hash,
    }
    if asked.parsed.ok:
        obj = asked.parsed.obj
        assert obj is not None  # an answer that parsed carries its verdict (parse_choice, ask_probs above)
        row.update(map_back(row["order"], obj["best"], obj["ranking"]))
        if obj.get("probs") is not None:
            row["probs"] = obj["probs"]
    else:
        row.update({"best_label": None, "best_position": None, "best_system": None, "tie": None, "ranking_systems": None})
    return row


def _anonymous_text(t: Transcript) -> str:
    """The dialogue without anything naming the system (speaker names are persona names)."""
    return prompts.dialogue_text(t)


# -------------------------------------------------------------------------- collecting the trios


def shared_trios(transcripts: list[Transcript], systems: list[str] | None = None) -> tuple[list[str], list[list[Transcript]]]:
    """Group transcripts by context (pair_key) across exactly three systems; only contexts all three share."""
    by_sys: dict[str, dict[str, Transcript]] = defaultdict(dict)
    for t in transcripts:
        by_sys[t.system][t.pair_key] = t
    names = systems or sorted(by_sys)
    for s in names:
        if s not in by_sys:
            raise UserError(f"--systems: no transcripts of system '{s}'; the runs hold {', '.join(sorted(by_sys))}")
    if len(names) != 3:
        raise UserError(
            f"three-way comparison needs exactly 3 systems, found {len(names)} ({', '.join(names)}); "
            "pass three run directories with one system each, or --systems a,b,c"
        )
    keys = sorted(set.intersection(*(set(by_sys[s]) for s in names)))
    if not keys:
        raise UserError(
            f"systems {', '.join(names)} share no context (task:context:profile); generate them on the same task and sample"
        )
    return names, [[by_sys[s][k] for s in names] for k in keys]


def load_for_compare(run_dirs: list[RunDir]) -> list[Transcript]:
    """Transcripts of all runs; a system name found in several runs is renamed ``<system>@<run id>``."""
    per_run = [(rd, rd.transcripts()) for rd in run_dirs]
    owners: dict[str, set[str]] = defaultdict(set)
    for rd, ts in per_run:
        for t in ts:
            owners[t.system].add(str(rd.path))
    out = []
    for rd, ts in per_run:
        for t in ts:
            if len(owners[t.system]) > 1:
                t.system = f"{t.system}@{rd.run_id}"
            out.append(t)
    return out


@dataclass
class CompareResult:
    new: int = 0
    reused: int = 0
    unscored: int = 0
    failed: int = 0  # calls that failed for good (retried on the next resume)
    seconds: float = 0.0
    systems: list[str] = field(default_factory=list)
    contexts: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)


def _done(rows: list[dict[str, Any]]) -> set[tuple]:
    done = set()
    for r in rows:
        if r.get("status") == "call_failed":
            continue
        done.add((r["pair_key"], r["judge"], tuple(r["order"]), r.get("spec_hash"), r.get("template_hash")))
    return done


def latest_comparisons(rows) -> list[dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        out[(r["pair_key"], r["judge"], tuple(r["order"]))] = r
    return list(out.values())


async def compare_async(
    transcripts: list[Transcript],
    judges: list[str] | list[JudgeSpec] | str,
    out: RunDir,
    *,
    systems: list[str] | None = None,
    order_mode: str = "all",
    limit: int | None = None,
    settings: ClientSettings | None = None,
    progress: bool = True,
) -> CompareResult:
    # a list holds names or specs, told apart by its first item
    specs = (
        parse_judges(judges)
        if isinstance(judges, str) or (judges and isinstance(judges[0], str))
        else cast("list[JudgeSpec]", list(judges))
    )
    panel = [Judge(s, settings) for s in specs]
    names, trios = shared_trios(transcripts, systems)
    if limit is not None:
        trios = trios[:limit]
    ords = orders(order_mode)
    standalone = not out.locked
    with out.lock():
        if standalone:
            from ..backends.usage import begin_run

            begin_run(float(out.read_manifest().get("cost_usd") or 0.0))
        return await _compare_locked(out, panel, names, trios, ords, order_mode, progress)


async def _compare_locked(
    out: RunDir,
    panel: list[Judge],
    names: list[str],
    trios: list[list[Transcript]],
    ords: list[tuple[int, int, int]],
    order_mode: str,
    progress: bool,
) -> CompareResult:
    from ..records.manifest import StepRecord
    from ..runs.ledger import record_ledger

    done = _done(list(out.comparisons()))
    res = CompareResult(systems=names, contexts=len(trios))
    jobs = []
    for j in panel:
        for trio in trios:
            for k, o in enumerate(ords):
                key = (trio[0].pair_key, j.spec.name, tuple(trio[i].system for i in o), j.spec_hash, j.template_hash)
                if key in done:
                    res.reused += 1
                else:
                    jobs.append((j, trio, o, k))
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(32)

    async def one(job) -> None:
        async with sem:
            row = await compare_one(*job)
        out.append_comparison(row)
        res.new += 1
        if row["status"] == "call_failed":
            res.failed += 1
            if len(res.failures) < 20:
                res.failures.append({"id": f"{row['pair_key']}|{row['judge']}|{'/'.join(row['order'])}", "error": row["reason"]})
        elif row["status"] != "scored":
            res.unscored += 1
        if progress:
            print(f"\rcomparing: {res.new}/{len(jobs)} calls", end="", file=sys.stderr, flush=True)

    started = _now()
    status = "done"
    try:
        await run_all(one(job) for job in jobs)
    except BaseException:
        status = "stopped"
        raise
    finally:
        res.seconds = time.perf_counter() - t0
        if progress and jobs:
            print(file=sys.stderr)
        if status == "done" and res.failed:
            status = "done_with_failures"
        out.update_manifest(
            comparisons={"systems": names, "orders": order_mode, "judges": [j.spec.name for j in panel]},
            steps={
                "compare": StepRecord(
                    status=status,
                    started=started,
                    ended=_now(),
                    seconds=round(res.seconds, 3),
                    counts={
                        "new": res.new,
                        "reused": res.reused,
                        "unscored": res.unscored,
                        "failed": res.failed,
                        "contexts": res.contexts,
                    },
                    failures=res.failures,
                ).model_dump()
            },
        )
        record_ledger(out)
    return res


# -------------------------------------------------------------------------- statistics


def bradley_terry(
    outcomes: list[tuple[str, str, float]], items: list[str], *, prior: float = 0.0, iters: int = 2000, tol: float = 1e-10
) -> dict[str, float]:
    """Log-strengths (mean zero) from pairwise outcomes ``(i, j, s)``: s = 1 if i beat j, 0.5 tie, 0 lost.

    Minorisation-maximisation (Hunter 2004) on the Bradley-Terry likelihood, ties counted as half a
    win to each side. ``prior`` adds that many virtual ties to every pair (keeps strengths finite when
    a system never wins; 0 gives the plain maximum-likelihood fit).
    """
    idx = {s: k for k, s in enumerate(items)}
    n = len(items)
    wins = np.zeros(n)
    games = np.zeros((n, n))
    for a, b, s in outcomes:
        i, j = idx[a], idx[b]
        wins[i] += s
        wins[j] += 1.0 - s
        games[i, j] += 1
        games[j, i] += 1
    if prior > 0:
        off = ~np.eye(n, dtype=bool)
        games[off] += prior
        wins += prior * 0.5 * (n - 1)
    p = np.ones(n)
    for _ in range(iters):
        denom = np.array([sum(games[i, j] / (p[i] + p[j]) for j in range(n) if j != i and games[i, j] > 0) for i in range(n)])
        new = np.where(denom > 0, wins / np.where(denom > 0, denom, 1.0), p)
        new = np.maximum(new, 1e-300)
        new = new / np.exp(np.mean(np.log(new)))
        if np.max(np.abs(np.log(new) - np.log(p))) < tol:
            p = new
            break
        p = new
    logp = np.log(p)
    return {s: float(logp[idx[s]] - logp.mean()) for s in items}


def pairwise_outcomes(row: dict[str, Any]) -> list[tuple[str, str, float]]:
    """What one valid comparison says about pairs of systems."""
    systems = row["order"]
    if row.get("tie"):
        return [(a, b, 0.5) for a, b in itertools.combinations(systems, 2)]
    rank = row.get("ranking_systems")
    if rank:
        return [(rank[i], rank[j], 1.0) for i, j in ((0, 1), (0, 2), (1, 2))]
    best = row["best_system"]
    return [(best, s, 1.0) for s in systems if s != best]


def _est(values, clusters, n_boot, seed) -> dict[str, float | int]:
    return bootstrap_mean(values, clusters, n_boot=n_boot, seed=seed).to_dict()


def _block(rows: list[dict[str, Any]], systems: list[str], n_boot: int, seed: int, bt_prior: float) -> dict[str, Any]:
    valid = [r for r in rows if r["status"] == "scored"]
    keys = [r["pair_key"] for r in valid]
    out: dict[str, Any] = {
        "n_calls": len(rows),
        "n_valid": len(valid),
        "n_unscored": len(rows) - len(valid),
        "unscored_rate": (len(rows) - len(valid)) / len(rows) if rows else float("nan"),
        "n_contexts": len({r["pair_key"] for r in rows}),
    }
    out["systems"] = {
        s: {
            "win": _est([float(r["best_system"] == s) for r in valid], keys, n_boot, seed),
            "tie": _est([float(bool(r["tie"])) for r in valid], keys, n_boot, seed),
            "loss": _est([float(not r["tie"] and r["best_system"] != s) for r in valid], keys, n_boot, seed),
        }
        for s in systems
    }
    picks = [r for r in valid if not r["tie"]]
    pk = [r["pair_key"] for r in picks]
    out["position_rates"] = {str(p): _est([float(r["best_position"] == p) for r in picks], pk, n_boot, seed) for p in (1, 2, 3)}
    out["first_position_rate"] = out["position_rates"]["1"]
    out["tie_rate"] = _est([float(bool(r["tie"])) for r in valid], keys, n_boot, seed)
    # per context: do the orders agree, and which system (if any) wins a strict majority of orders?
    by_ctx: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in valid:
        by_ctx[(r["pair_key"], r["judge"])].append(r)
    disagree, dkeys = [], []
    verdicts: Counter[str] = Counter()
    for (pkey, _judge), rs in by_ctx.items():
        answers = [r["best_system"] or "tie" for r in rs]
        if len(rs) >= 2:
            disagree.append(float(len(set(answers)) > 1))
            dkeys.append(pkey)
        top, cnt = Counter(answers).most_common(1)[0]
        verdicts[top if cnt * 2 > len(answers) else "no majority"] += 1
    out["order_disagreement"] = _est(disagree, dkeys, n_boot, seed)
    out["context_verdicts"] = dict(verdicts)
    out["bradley_terry"] = bt_with_ci(valid, systems, n_boot=min(n_boot, 500), seed=seed, prior=bt_prior)
    return out


def bt_with_ci(
    valid: list[dict[str, Any]], systems: list[str], *, n_boot: int = 500, seed: int = 0, prior: float = 0.5
) -> dict[str, Any]:
    """Bradley-Terry log-strengths with percentile intervals from resampling contexts, and ranks."""
    by_ctx: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
    for r in valid:
        by_ctx[r["pair_key"]].extend(pairwise_outcomes(r))
    ctxs = sorted(by_ctx)
    if not ctxs:
        return {"n_contexts": 0, "systems": {}}
    point = bradley_terry([o for c in ctxs for o in by_ctx[c]], systems, prior=prior)
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(ctxs), size=len(ctxs))
        reps.append(bradley_terry([o for k in pick for o in by_ctx[ctxs[k]]], systems, prior=prior, iters=300, tol=1e-8))
    ranked = sorted(systems, key=lambda s: -point[s])
    res = {}
    for s in systems:
        vals = np.array([r[s] for r in reps])
        lo, hi = np.quantile(vals, [0.025, 0.975]) if len(vals) else (float("nan"), float("nan"))
        res[s] = {"strength": point[s], "lo": float(lo), "hi": float(hi), "rank": ranked.index(s) + 1}
    return {"n_contexts": len(ctxs), "prior_ties_per_pair": prior, "systems": res}


def summarize_comparisons(rows, *, n_boot: int = 2000, seed: int = 0, bt_prior: float = 0.5) -> dict[str, Any]:
    """Win/tie/loss per system, position bias, order disagreement and Bradley-Terry; per judge and pooled."""
    rows = latest_comparisons(rows)
    if not rows:
        return {"n_calls": 0, "systems": [], "judges": {}, "pooled": None}
    systems = sorted({s for r in rows for s in r["systems"]})
    judges = sorted({r["judge"] for r in rows})
    out: dict[str, Any] = {
        "systems": systems,
        "orders_per_context": max(Counter((r["pair_key"], r["judge"]) for r in rows).values()),
    }
    out["judges"] = {j: _block([r for r in rows if r["judge"] == j], systems, n_boot, seed, bt_prior) for j in judges}
    out["pooled"] = _block(rows, systems, n_boot, seed, bt_prior)
    out["usage"] = _usage_totals(rows)
    return out


def _usage_totals(rows) -> dict[str, float]:
    tot: dict[str, float] = {}
    for r in rows:
        for k, v in (r.get("usage") or {}).items():
            if isinstance(v, (int, float)):
                tot[k] = tot.get(k, 0) + v
    return dict(tot)


def compare_runs(
    run_dirs: list[RunDir],
    judges: list[str] | list[JudgeSpec] | str,
    *,
    out: RunDir | None = None,
    systems: list[str] | None = None,
    order_mode: str = "all",
    limit: int | None = None,
    settings: ClientSettings | None = None,
    progress: bool = True,
) -> CompareResult:
    """Run three-way comparisons over the contexts the runs share; rows go to ``out/comparisons.jsonl``."""
    return run_sync(
        compare_async(
            load_for_compare(run_dirs),
            judges,
            out or run_dirs[0],
            systems=systems,
            order_mode=order_mode,
            limit=limit,
            settings=settings,
            progress=progress,
        )
    )
