"""Scripted judges with known score distributions for the regression-gate tests.

Item model (one judge score per (context, level, agent, criterion), integer 1-5): a shared base
score in {2, 3, 4} per item (the context and item effect, the same for baseline and candidate), then a
run-specific jitter: one point down with probability ``p_down``, one up with ``p_up``, independent per
item and per run (``salt``). The expected change of a run with (p_down, p_up) against the baseline's
(q, q) is 25 * (p_up - p_down) points on the 0-100 scale.
"""

from __future__ import annotations

import numpy as np

from mascot_eval.criteria import AGENT_CRITERIA, GROUP_CRITERIA
from mascot_eval.fileio import stable_hash
from tests.runfactory import AGENTS


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(int(stable_hash(list(map(str, key)), 12), 16))


def base_score(seed: int, ctx: int, level: str, agent: str | None, crit: str) -> int:
    r = _rng("base", seed, ctx, level, agent, crit)
    return int(np.clip(3 + round(r.normal(0, 0.8)), 2, 4))


def jittered(seed: int, salt: str, *, p_down: float, p_up: float):
    """A runfactory ScoreFn: base score plus this run's jitter."""

    def score(system, ctx, level, agent, crit):
        s = base_score(seed, ctx, level, agent, crit)
        u = _rng("jitter", seed, salt, system, ctx, level, agent, crit).random()
        return float(s - 1 if u < p_down else s + 1 if u < p_down + p_up else s)

    return score


def simulate_d(
    rng: np.random.Generator, n: int, *, base: tuple[float, float], cand: tuple[float, float], judges: int = 1
) -> dict[str, np.ndarray]:
    """Per-dialogue paired differences (0-100 points) of agent.overall and group.overall under the item
    model, without building run directories: {measure: array of n} (one dialogue per context)."""
    n_agent, n_group = len(AGENTS) * len(AGENT_CRITERIA), len(GROUP_CRITERIA)

    def jitter(p, size):
        u = rng.random(size)
        return np.where(u < p[0], -1.0, np.where(u < p[0] + p[1], 1.0, 0.0))

    out = {}
    for measure, items in (("agent.overall", n_agent), ("group.overall", n_group)):
        jb = jitter(base, (n, items, judges)).mean(axis=2)
        jc = jitter(cand, (n, items, judges)).mean(axis=2)
        out[measure] = 25.0 * (jc - jb).mean(axis=1)
    return out
