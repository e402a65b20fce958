"""Lexical diversity: distinct-n and n-gram entropy of the agents' words (n = 1, 2, 3).

Definitions (tokens from :mod:`mascot_eval.metrics.tokenize`; n-grams never cross turns):

- distinct-n = (number of distinct n-grams) / (total number of n-grams) over the pooled agent
  turns of a unit (Li et al., 2016). Range (0, 1]; higher = more diverse.
- entropy-n = -sum_g p(g) log2 p(g), with p(g) the relative frequency of n-gram g among the pooled
  agent turns of the unit (Zhang et al., 2018). In bits, >= 0; higher = more diverse.

Pooling units: ``<name>_agent`` one agent's turns in one dialogue; ``<name>`` all agent turns of a
dialogue; ``<name>_corpus`` all agent turns of one system on one task. User turns never count.
Units without any n-gram produce no row (counted in the notes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import register
from .base import Metric, Rows
from .context import MetricContext
from .ngrams import distinct_and_entropy

_SCOPE_DOC = {
    "agent": "one agent's turns in one dialogue",
    "dialogue": "all agent turns of one dialogue",
    "corpus": "all agent turns of one system on one task",
}


def _lexical(ctx: MetricContext, scope: str, n: int) -> tuple[np.ndarray, np.ndarray, list]:
    def run() -> tuple[np.ndarray, np.ndarray, list]:
        turns = ctx.agent_turns
        keys: dict[tuple, int] = {}
        set_ids = []
        k: tuple[Any, ...]
        for r in turns:
            if scope == "agent":
                k = (r.ti, r.speaker)
            elif scope == "dialogue":
                k = (r.ti,)
            else:
                k = (ctx.group_of[r.ti],)
            set_ids.append(keys.setdefault(k, len(keys)))
        seq = np.fromiter((r.text_id for r in turns), dtype=np.int64, count=len(turns))
        d, e, _ = distinct_and_entropy(ctx.ngrams, n, seq, np.asarray(set_ids, dtype=np.int64), len(keys))
        return d, e, list(keys)

    return ctx.memo(f"lexical:{scope}:{n}", run)


def _make(kind: str, scope: str, n: int) -> Metric:
    name = f"{kind}_{n}" + ("" if scope == "dialogue" else f"_{scope}")

    def fn(ctx: MetricContext) -> Rows:
        d, e, keys = _lexical(ctx, scope, n)
        vals = d if kind == "distinct" else e
        rows = Rows()
        for i, k in enumerate(keys):
            if np.isnan(vals[i]):
                ctx.note(f"{name}: unit without {n}-grams")
                continue
            if scope == "agent":
                rows.add(k[0], vals[i], agent=k[1])
            elif scope == "dialogue":
                rows.add(k[0], vals[i])
            else:
                rows.add(-(k[0] + 1), vals[i])
        return rows

    if kind == "distinct":
        desc = (
            f"distinct-{n}: distinct {n}-grams / total {n}-grams over {_SCOPE_DOC[scope]} "
            "(lower-cased word/punctuation tokens; n-grams within a turn). Range (0, 1]."
        )
        rng: tuple[float | None, float | None] = (0.0, 1.0)
    else:
        desc = (
            f"entropy-{n}: Shannon entropy in bits of the {n}-gram frequency distribution over "
            f"{_SCOPE_DOC[scope]} (lower-cased word/punctuation tokens). >= 0."
        )
        rng = (0.0, None)
    unit = {"agent": "agent", "dialogue": "dialogue", "corpus": "corpus"}[scope]
    return Metric(name=name, unit=unit, description=desc, higher="more lexically diverse", fn=fn, range=rng)


for _kind in ("distinct", "entropy"):
    for _scope in ("agent", "dialogue", "corpus"):
        for _n in (1, 2, 3):
            register(_make(_kind, _scope, _n))
