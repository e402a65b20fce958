"""Inter-agent redundancy within a round: how much the agents' replies to the same user turn overlap.

A round is one user turn and the agent turns that follow it (``Turn.round``). Rounds with fewer than
two agent turns produce no row (counted in the notes). Higher = more redundant for all three.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import register
from .base import Metric, Rows
from .bleu import self_bleu_jobs
from .context import MetricContext, TurnRef


def _multi_agent_rounds(ctx: MetricContext, name: str) -> list[tuple[int, int, list[TurnRef]]]:
    def run() -> list[tuple[int, int, list[TurnRef]]]:
        out = []
        skipped = 0
        for ti in range(len(ctx.transcripts)):
            for rnd, turns in sorted(ctx.rounds_of(ti).items()):
                agents = [r for r in turns if not r.is_user]
                if len(agents) >= 2:
                    out.append((ti, rnd, agents))
                elif agents:
                    skipped += 1
        ctx.memo("rounds:skipped", lambda: skipped)
        return out

    rounds = ctx.memo("rounds:multi", run)
    skipped = ctx.memo("rounds:skipped", lambda: 0)
    if skipped:
        ctx.note(f"{name}: round with a single agent turn", skipped)
    return rounds


def _selfbleu(ctx: MetricContext) -> Rows:
    rounds = _multi_agent_rounds(ctx, "inter_agent_selfbleu")
    groups = [[a.text_id for a in agents] for _, _, agents in rounds]
    vals = self_bleu_jobs(ctx.ngrams, groups)
    owner = np.repeat(np.arange(len(rounds), dtype=np.int64), [len(g) for g in groups])
    sums = np.bincount(owner, weights=vals, minlength=len(rounds))
    counts = np.bincount(owner, minlength=len(rounds))
    rows = Rows()
    for k, (ti, rnd, _) in enumerate(rounds):
        rows.add(ti, sums[k] / counts[k], round=rnd)
    return rows


def _rouge(ctx: MetricContext) -> Rows:
    rows = Rows()
    rouge = ctx.rouge
    for ti, rnd, agents in _multi_agent_rounds(ctx, "inter_agent_rougeL"):
        texts = [ctx.texts[a.text_id] for a in agents]
        vals = [rouge(a, b) for a, b in itertools.combinations(texts, 2)]
        rows.add(ti, sum(vals) / len(vals), round=rnd)
    return rows


def _cosine(ctx: MetricContext) -> Rows:
    rows = Rows()
    vec = ctx.vectors
    for ti, rnd, agents in _multi_agent_rounds(ctx, "inter_agent_cosine"):
        e = vec[[a.text_id for a in agents]].astype(np.float64)
        sim = e @ e.T
        k = len(agents)
        rows.add(ti, (sim.sum() - np.trace(sim)) / (k * (k - 1)), round=rnd)
    return rows


register(
    Metric(
        name="inter_agent_selfbleu",
        unit="round",
        higher="more redundant",
        fn=_selfbleu,
        range=(0.0, 1.0),
        description=(
            "Self-BLEU among the agents' replies in one round: for each agent turn, sentence BLEU-4 "
            "(uniform weights, nltk SmoothingFunction(epsilon=0.1).method1, closest-reference brevity "
            "penalty) with the round's other agent turns as references; the round's value is the mean "
            "over its agent turns. Tokens: lower-cased words and punctuation. Equal to nltk sentence_bleu. Range [0, 1]."
        ),
    )
)
register(
    Metric(
        name="inter_agent_rougeL",
        unit="round",
        higher="more redundant",
        fn=_rouge,
        range=(0.0, 1.0),
        description=(
            "Mean ROUGE-L F-measure (rouge-score tokenizer, no stemming) over all unordered pairs of agent "
            "turns in one round. Range [0, 1]."
        ),
    )
)
register(
    Metric(
        name="inter_agent_cosine",
        unit="round",
        higher="more redundant",
        fn=_cosine,
        needs_embeddings=True,
        range=(-1.0, 1.0),
        description=(
            "Mean cosine similarity of MiniLM-L6 sentence embeddings (mean-pooled, L2-normalised) over all "
            "unordered pairs of agent turns in one round. Range [-1, 1]."
        ),
    )
)
