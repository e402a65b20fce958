"""Build run directories by hand (transcripts, judgments, metrics) for the stats/report/regress tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from mascot_eval.fileio import stable_hash
from mascot_eval.criteria import AGENT_CRITERIA, GROUP_CRITERIA
from mascot_eval.runs.rundir import RunDir
from mascot_eval.transcript import Transcript, Turn, make_dialogue_id
from tests.judge_helpers import played

AGENTS = ["Anchor", "Catalyst", "Beacon"]

# score(system, context_index, level, agent, criterion) -> 1-5 score or None (unscored)
ScoreFn = Callable[[str, int, str, str | None, str], float | None]


def make_transcript(
    task: str, ctx: int, system: str, *, split: str = "in_domain", rounds: int = 2, agents: list[str] = AGENTS
) -> Transcript:
    cid = f"c{ctx:03d}"
    turns = []
    for r in range(1, rounds + 1):
        turns.append(Turn(round=r, speaker="user", text=f"I feel stuck with problem {ctx}, round {r}."))
        for a in agents:
            turns.append(
                Turn(
                    round=r, speaker=a, text=f"{a} says something about {ctx} in round {r} as {system}.", model="fake/x", meta={}
                )
            )
    return Transcript(
        dialogue_id=make_dialogue_id(task, cid, None, system),
        task=task,
        task_version="1",
        split=split,
        domain="emotional",
        context_id=cid,
        system=system,
        system_config_hash="h" + system,
        persona_group="emotional",
        agents=list(agents),
        turns=turns,
        context={"situation": f"situation {ctx}"},
        personas=played(list(agents)),
    )


def judgment_rows(t: Transcript, judge: str, score: ScoreFn, ctx: int) -> list[dict]:
    rows = []
    base = {
        "schema": "mascot-judgment/2",
        "dialogue_id": t.dialogue_id,
        "pair_key": t.pair_key,
        "system": t.system,
        "task": t.task,
        "split": t.split,
        "domain": t.domain,
        "context_id": t.context_id,
        "judge": judge,
        "judge_model": f"fake/{judge}",
        "usage": None,
        "spec_hash": "s",
        "template_hash": "t",
    }
    for a in t.agents:
        for c in AGENT_CRITERIA:
            rows.append(_row(base, "agent", a, c, score(t.system, ctx, "agent", a, c)))
    for c in GROUP_CRITERIA:
        rows.append(_row(base, "group", None, c, score(t.system, ctx, "group", None, c)))
    return rows


def _row(base: dict, level: str, agent: str | None, crit: str, s: float | None) -> dict:
    if s is None:
        return {
            **base,
            "level": level,
            "agent": agent,
            "criterion": crit,
            "score": None,
            "score_100": None,
            "weighted_score": None,
            "status": "unscored",
            "reason": "no score in reply",
            "rationale": None,
        }
    return {
        **base,
        "level": level,
        "agent": agent,
        "criterion": crit,
        "score": s,
        "score_100": (s - 1) / 4 * 100,
        "weighted_score": s,
        "status": "scored",
        "reason": None,
        "rationale": f"because {crit} looked like {s}",
    }


def metric_rows(t: Transcript, value: float) -> list[dict]:
    rows = []
    for r, turns in t.rounds().items():
        rows.append(
            {
                "dialogue_id": t.dialogue_id,
                "pair_key": t.pair_key,
                "system": t.system,
                "task": t.task,
                "split": t.split,
                "domain": t.domain,
                "agent": None,
                "round": r,
                "metric": "inter_agent_selfbleu",
                "value": value + 0.01 * r,
                "unit": "round",
            }
        )
        for turn in turns:
            if not turn.is_user:
                rows.append(
                    {
                        "dialogue_id": t.dialogue_id,
                        "pair_key": t.pair_key,
                        "system": t.system,
                        "task": t.task,
                        "split": t.split,
                        "domain": t.domain,
                        "agent": turn.speaker,
                        "round": r,
                        "metric": "persona_similarity",
                        "value": 0.5 - 0.05 * r + value / 10,
                        "unit": "turn",
                    }
                )
    return rows


def build_run(
    path: Path,
    *,
    systems: list[str],
    score: ScoreFn,
    n_contexts: int = 12,
    task: str = "ed-positive",
    split: str = "in_domain",
    judges: tuple[str, ...] = ("gpt",),
    metric_value: Callable[[str, int], float] | None = None,
    manifest: dict | None = None,
) -> RunDir:
    rd = RunDir(path, create=True)
    metrics = []
    for s in systems:
        for i in range(n_contexts):
            t = make_transcript(task, i, s, split=split)
            rd.append_transcript(t)
            for j in judges:
                for row in judgment_rows(t, j, score, i):
                    rd.append_judgment(row)
            if metric_value is not None:
                metrics.extend(metric_rows(t, metric_value(s, i)))
    if metrics:
        df = pd.DataFrame(metrics)
        corpus = df.groupby(["system", "task", "split", "domain"], as_index=False)["value"].mean()
        corpus = corpus.assign(dialogue_id=None, pair_key=None, agent=None, round=None, metric="distinct_2", unit="corpus")
        df = pd.concat([df, corpus], ignore_index=True)
        df.to_parquet(rd.metrics_path)
        df.to_csv(rd.path / "metrics.csv", index=False)
    rd.update_manifest(
        run_id=rd.run_id, tasks={task: {"version": "1", "content_hash": "abc", "split": split}}, **(manifest or {})
    )
    return rd


def noisy_scores(offsets: dict[str, float], seed: int = 0, noise: float = 0.4) -> ScoreFn:
    """Scores around 3 + offsets[system], deterministic per (system, context, agent, criterion)."""

    def score(system, ctx, level, agent, crit):
        rng = np.random.default_rng(int(stable_hash([seed, ctx, level, agent, crit], 8), 16))
        base = 3.0 + rng.normal(0, noise)  # shared context effect: the same for every system
        s = (
            base
            + offsets[system]
            + np.random.default_rng(int(stable_hash([seed, system, ctx, agent, crit], 8), 16)).normal(0, noise / 2)
        )
        return float(np.clip(round(s * 2) / 2, 1, 5))

    return score
