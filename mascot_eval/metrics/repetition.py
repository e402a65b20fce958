"""Self-repetition across rounds: how much an agent repeats its own earlier turns in a dialogue.

Each agent turn that has at least one earlier turn by the same agent in the same dialogue gets a
row; an agent's first turn has none.
"""

from __future__ import annotations

import numpy as np

from . import register
from .base import Metric, Rows
from .bleu import bleu_jobs
from .context import MetricContext, TurnRef
from .echo import rowwise_cosine


def _history(ctx: MetricContext) -> list[tuple[TurnRef, list[TurnRef]]]:
    def run() -> list[tuple[TurnRef, list[TurnRef]]]:
        out = []
        for ti in range(len(ctx.transcripts)):
            seen: dict[str, list[TurnRef]] = {}
            for r in ctx.turns_of(ti):
                if r.is_user:
                    continue
                earlier = seen.setdefault(r.speaker, [])
                if earlier:
                    out.append((r, list(earlier)))
                earlier.append(r)
        return out

    return ctx.memo("repetition:history", run)


def _bleu(ctx: MetricContext) -> Rows:
    hist = _history(ctx)
    vals = bleu_jobs(ctx.ngrams, [t.text_id for t, _ in hist], [[e.text_id for e in prev] for _, prev in hist])
    rows = Rows()
    rows.extend([t.ti for t, _ in hist], vals, [t.speaker for t, _ in hist], [t.round for t, _ in hist])
    return rows


def _cosine(ctx: MetricContext) -> Rows:
    hist = _history(ctx)
    rows = Rows()
    if not hist:
        return rows
    vec = ctx.vectors
    # every (turn, earlier turn) pair at once, then the maximum per turn
    a = [t.text_id for t, prev in hist for _ in prev]
    b = [e.text_id for _, prev in hist for e in prev]
    sims = rowwise_cosine(vec, a, b)
    starts = np.concatenate([[0], np.cumsum([len(prev) for _, prev in hist])[:-1]]).astype(np.int64)
    best = np.maximum.reduceat(sims, starts)
    rows.extend([t.ti for t, _ in hist], best, [t.speaker for t, _ in hist], [t.round for t, _ in hist])
    return rows


register(
    Metric(
        name="self_repetition_bleu",
        unit="turn",
        higher="more self-repetitive",
        fn=_bleu,
        range=(0.0, 1.0),
        description=(
            "Sentence BLEU-4 (same tokens and nltk method1 smoothing as inter_agent_selfbleu) of an agent turn "
            "with all of the same agent's earlier turns in the dialogue as references. Range [0, 1]."
        ),
    )
)
register(
    Metric(
        name="self_repetition_cosine",
        unit="turn",
        higher="more self-repetitive",
        fn=_cosine,
        needs_embeddings=True,
        range=(-1.0, 1.0),
        description="Maximum MiniLM-L6 cosine similarity between an agent turn and the same agent's earlier turns in the dialogue.",
    )
)
