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
    for (t, _), v in zip(hist, vals):
        rows.add(t.ti, v, agent=t.speaker, round=t.round)
    return rows


def _cosine(ctx: MetricContext) -> Rows:
    vec = ctx.vectors
    rows = Rows()
    for t, prev in _history(ctx):
        sims = vec[[e.text_id for e in prev]].astype(np.float64) @ vec[t.text_id].astype(np.float64)
        rows.add(t.ti, float(sims.max()), agent=t.speaker, round=t.round)
    return rows


register(Metric(
    name="self_repetition_bleu", unit="turn", higher="more self-repetitive", fn=_bleu, range=(0.0, 1.0),
    description=(
        "Sentence BLEU-4 (same tokens and nltk method1 smoothing as inter_agent_selfbleu) of an agent turn "
        "with all of the same agent's earlier turns in the dialogue as references. Range [0, 1]."
    ),
))
register(Metric(
    name="self_repetition_cosine", unit="turn", higher="more self-repetitive", fn=_cosine, needs_embeddings=True,
    range=(-1.0, 1.0),
    description="Maximum MiniLM-L6 cosine similarity between an agent turn and the same agent's earlier turns in the dialogue.",
))
