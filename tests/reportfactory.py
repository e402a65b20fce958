"""A run directory with everything the HTML report shows: three systems, two judges, per-round
metrics, three-way comparisons and a trainer checkpoint with a training log."""

from __future__ import annotations

import itertools
from pathlib import Path

from mascot_eval.fileio import append_jsonl, atomic_write_json
from mascot_eval.runs.rundir import RunDir
from tests.runfactory import build_run, judgment_rows, noisy_scores

SYSTEMS = ["mascot", "zero-shot", "few-shot"]
OFFSETS = {"mascot": 0.7, "zero-shot": 0.0, "few-shot": 0.2}


def comparison_rows(rd: RunDir, n_contexts: int, judge: str = "gpt") -> list[dict]:
    """All 6 orders per context; the judge picks mascot except on every third context (a tie)."""
    rows = []
    by_sys = {t.system: t for t in rd.transcripts()}
    task = next(iter(by_sys.values())).task
    for i in range(n_contexts):
        cid = f"c{i:03d}"
        pair_key = f"{task}:{cid}:-"
        for k, order in enumerate(itertools.permutations(SYSTEMS)):
            tie = i % 3 == 2
            best = None if tie else "mascot"
            rows.append(
                {
                    "schema": "mascot-comparison/1",
                    "pair_key": pair_key,
                    "task": task,
                    "split": "in_domain",
                    "domain": "emotional",
                    "context_id": cid,
                    "judge": judge,
                    "judge_model": f"fake/{judge}",
                    "systems": sorted(SYSTEMS),
                    "order": list(order),
                    "order_index": k,
                    "dialogue_ids": [f"{task}:{cid}:-:{s}" for s in order],
                    "status": "scored",
                    "reason": None,
                    "rationale": "A listens best" if not tie else "all equally good",
                    "usage": {},
                    "call_id": f"x{i}{k}",
                    "spec_hash": "s",
                    "template_hash": "t",
                    "best_label": "tie" if tie else "ABC"[order.index("mascot")],
                    "best_position": None if tie else order.index("mascot") + 1,
                    "best_system": best,
                    "tie": tie,
                    "ranking_systems": None,
                }
            )
    return rows


def train_log_rows(steps: int = 6) -> list[dict]:
    rows = []
    for e in range(1, 4):
        rows.append(
            {
                "time": "t",
                "stage": "stage1",
                "step_name": "reward_model",
                "epoch": e,
                "loss": 0.7 - 0.1 * e,
                "train_acc": 0.5 + 0.1 * e,
                "heldout_acc": 0.5 + 0.05 * e,
                "train_pairs": 40,
                "heldout_pairs": 10,
            }
        )
    for stage, names in (("stage1", ["anchor", "catalyst"]), ("stage2", ["director"])):
        for k, name in enumerate(names):
            rows.append(
                {
                    "time": "t",
                    "stage": stage,
                    "step_name": "lora",
                    "name": name,
                    "trainable_params": 921600,
                    "total_params": 135436608,
                    "trainable_pct": 0.68,
                }
            )
            for s in range(1, steps + 1):
                rows.append(
                    {
                        "time": "t",
                        "stage": stage,
                        "step_name": "grpo",
                        "name": name,
                        "step": s,
                        "loss": 0.1 / s + 0.01 * k,
                        "reward": 0.2 + (0.05 - 0.01 * k) * s,
                        "kl": 0.01 * s,
                        "reward_std": 0.1,
                        "rewards/persona_reward/mean": 0.3 + 0.04 * s,
                    }
                )
    return rows


def build_report_run(
    tmp: Path, *, n_contexts: int = 12, judges: tuple[str, ...] = ("gpt", "claude"), with_checkpoint: bool = True
) -> RunDir:
    ckpt = tmp / "ckpt"
    manifest: dict = {
        "status": "complete",
        "started": "2026-01-01T00:00:00+00:00",
        "ended": "2026-01-01T00:10:00+00:00",
        "systems": {s: {} for s in SYSTEMS},
        "judges": {j: {} for j in judges},
    }
    if with_checkpoint:
        ckpt.mkdir(parents=True, exist_ok=True)
        atomic_write_json(ckpt / "checkpoint.json", {"schema": "mascot-checkpoint/1", "base_model": "embedded"})
        for r in train_log_rows():
            append_jsonl(ckpt / "train_log.jsonl", r)
        manifest["models"] = {"default": "embedded", "checkpoint": str(ckpt)}
    score = noisy_scores(OFFSETS)
    rd = build_run(
        tmp / "run-report",
        systems=SYSTEMS,
        score=score,
        n_contexts=n_contexts,
        judges=judges[:1],
        metric_value=lambda s, i: {"mascot": 0.1, "zero-shot": 0.3, "few-shot": 0.25}[s] + 0.01 * (i % 3),
        manifest=manifest,
    )
    for judge in judges[1:]:  # further judges: half a point off on some items, one reply unparseable

        def other(system, ctx, level, agent, crit):
            if ctx == 0 and system == "mascot" and crit == "empathy" and agent == "Anchor":
                return None
            s = score(system, ctx, level, agent, crit)
            return min(5.0, s + 0.5) if (ctx + len(crit)) % 3 == 0 else s

        for t in rd.transcripts():
            for row in judgment_rows(t, judge, other, int(t.context_id[1:])):
                rd.append_judgment(row)
    for row in comparison_rows(rd, n_contexts):
        append_jsonl(rd.comparisons_path, row)
    return rd
