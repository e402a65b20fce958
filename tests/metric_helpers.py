"""Small hand-built transcripts and look-ups for the metric tests."""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from mascot_eval.transcript import Transcript, Turn, make_dialogue_id
from tests.judge_helpers import played

AGENTS = ["Anchor", "Catalyst", "Beacon"]


def dialogue(
    rounds: list[tuple[str, list[tuple[str, str]]]],
    *,
    system: str = "sys",
    task: str = "t",
    ctx: str = "c1",
    agents: list[str] | None = None,
    group: str = "emotional",
) -> Transcript:
    """``rounds``: [(user text, [(agent, text), ...]), ...]; rounds are numbered from 1."""
    turns = []
    for r, (user, replies) in enumerate(rounds, start=1):
        turns.append(Turn(round=r, speaker="user", text=user))
        for agent, text in replies:
            turns.append(Turn(round=r, speaker=agent, text=text))
    names = agents or list(dict.fromkeys(a for _, rep in rounds for a, _ in rep))
    return Transcript(
        dialogue_id=make_dialogue_id(task, ctx, None, system),
        task=task,
        task_version="1",
        split="in_domain",
        domain="emotional",
        context_id=ctx,
        system=system,
        system_config_hash="h",
        persona_group=group,
        agents=names,
        turns=turns,
        personas=played(names, group),
    )


def values(df: pd.DataFrame, metric: str, **where) -> list[float]:
    """Values of ``metric`` in table order, filtered by column equality (None matches null)."""
    sel = df[df["metric"] == metric]
    for col, val in where.items():
        sel = sel[sel[col].isna()] if val is None else sel[sel[col] == val]
    return [float(v) for v in sel["value"]]


def one(df: pd.DataFrame, metric: str, **where) -> float:
    vals = values(df, metric, **where)
    assert len(vals) == 1, f"{metric} {where}: {len(vals)} rows"
    return vals[0]


class TableEmbedder:
    """A fake embedder: texts listed in ``table`` get those (normalised) vectors, others a fixed
    pseudo-random unit vector derived from the text; records every batch it was asked for."""

    def __init__(self, table: dict[str, list[float]] | None = None, dim: int = 8) -> None:
        self.table = {k: np.asarray(v, dtype=np.float64) for k, v in (table or {}).items()}
        self.dim = dim if not self.table else len(next(iter(self.table.values())))
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            if t in self.table:
                v = self.table[t]
            else:
                v = np.random.default_rng(zlib.crc32(t.encode())).normal(size=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out.astype(np.float32)
