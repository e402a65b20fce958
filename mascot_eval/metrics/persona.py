"""Persona fidelity and distinctiveness from text alone (MiniLM-L6 embeddings).

Persona card text = ``PersonaCard.prompt_block()`` of the card whose display name is the speaker in
the transcript's persona group (``tasks/personas``). Transcripts whose group or speaker has no card
produce no persona_similarity / persona_card_margin rows (counted in the notes).
Collapse (agents sounding alike) shows up as low centroid distance and low separability.
"""

from __future__ import annotations

import numpy as np

from . import register
from .base import Metric, Rows
from .context import MetricContext
from .echo import BLOCK, rowwise_cosine


def _norm(m: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.divide(m, n, out=np.zeros_like(m), where=n > 0)


def _card_matrix(ctx: MetricContext) -> tuple[dict[tuple[str, str], int], np.ndarray, list[int]]:
    """(persona group, speaker) -> row of a matrix of card embeddings (float64), and each card's
    row in ``ctx.vectors``."""

    def run() -> tuple[dict[tuple[str, str], int], np.ndarray, list[int]]:
        cards = ctx.card_texts
        keys = sorted(cards)
        if not keys:
            return {}, np.zeros((0, 0)), []
        mat = np.stack([ctx.vec_of_text(cards[k]) for k in keys]).astype(np.float64)
        return {k: i for i, k in enumerate(keys)}, mat, [ctx.vec_id_of_text(cards[k]) for k in keys]

    return ctx.memo("persona:cards", run)


def _persona_similarity(ctx: MetricContext) -> Rows:
    rows = Rows()
    if not ctx.agent_turns:
        return rows
    row_of, _, card_vec_ids = _card_matrix(ctx)
    turns, card_rows = [], []
    for r in ctx.agent_turns:
        i = row_of.get((ctx.card_group(r.ti), r.speaker))
        if i is not None:
            turns.append(r)
            card_rows.append(i)
    missing = len(ctx.agent_turns) - len(turns)
    if turns:
        vals = rowwise_cosine(ctx.vectors, [r.text_id for r in turns], [card_vec_ids[i] for i in card_rows])
        rows.extend([r.ti for r in turns], vals, [r.speaker for r in turns], [r.round for r in turns])
    if missing:
        ctx.note("persona_similarity: speaker without a persona card", missing)
    return rows


def _card_margin(ctx: MetricContext) -> Rows:
    rows = Rows()
    if not ctx.agent_turns:
        return rows
    row_of, mat, _ = _card_matrix(ctx)
    members: dict[str, list[int]] = {}
    for (g, _), row in row_of.items():
        members.setdefault(g, []).append(row)
    turns, own, others = [], [], []
    for r in ctx.agent_turns:
        g = ctx.card_group(r.ti)
        i = row_of.get((g, r.speaker))
        if i is None or len(members[g]) < 2:
            continue
        turns.append(r)
        own.append(i)
        others.append([j for j in members[g] if j != i])
    missing = len(ctx.agent_turns) - len(turns)
    if turns:
        ids = np.array([r.text_id for r in turns], dtype=np.int64)
        sims = np.zeros((len(turns), len(mat)))  # every turn against every card, block by block
        for s in range(0, len(ids), BLOCK):
            sims[s : s + BLOCK] = ctx.vectors[ids[s : s + BLOCK]].astype(np.float64) @ mat.T
        idx = np.arange(len(turns))
        own_sim = sims[idx, own]
        other_sim = np.full(len(turns), -np.inf)
        width = max(len(o) for o in others)
        for k in range(width):
            col = np.array([o[k] if k < len(o) else o[0] for o in others], dtype=np.int64)
            other_sim = np.maximum(other_sim, sims[idx, col])
        rows.extend([r.ti for r in turns], own_sim - other_sim, [r.speaker for r in turns], [r.round for r in turns])
    if missing:
        ctx.note("persona_card_margin: speaker without a card or group with one card", missing)
    return rows


def _mean_centroid_distance(x: np.ndarray, labels: np.ndarray) -> float | None:
    agents = np.unique(labels)
    if len(agents) < 2:
        return None
    c = _norm(np.stack([x[labels == a].mean(0) for a in agents]))
    sim = c @ c.T
    k = len(agents)
    return float(1.0 - (sim.sum() - np.trace(sim)) / (k * (k - 1)))


def _group_turns(ctx: MetricContext) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    def run() -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        by: dict[int, list] = {}
        for r in ctx.agent_turns:
            by.setdefault(ctx.group_of[r.ti], []).append(r)
        out = {}
        vec = ctx.vectors
        for g, refs in by.items():
            out[g] = (
                vec[[r.text_id for r in refs]].astype(np.float64),
                np.array([r.speaker for r in refs], dtype=object),
                np.array([r.ti for r in refs], dtype=np.int64),
            )
        return out

    return ctx.memo("persona:group_turns", run)


def _centroid_dialogue(ctx: MetricContext) -> Rows:
    """Vectorised over dialogues: with unit (or zero) centroids c_a of the k agents of a dialogue,
    the mean pairwise cosine is (|sum_a c_a|^2 - sum_a |c_a|^2) / (k (k - 1))."""
    rows = Rows()
    turns = ctx.agent_turns
    if not turns:
        return rows
    keys: dict[tuple[int, str], int] = {}
    idx = np.fromiter((keys.setdefault((r.ti, r.speaker), len(keys)) for r in turns), dtype=np.int64, count=len(turns))
    ids = np.array([r.text_id for r in turns], dtype=np.int64)
    dim = ctx.vectors.shape[1]
    sums = np.zeros((len(keys), dim))
    for s in range(0, len(ids), BLOCK):
        np.add.at(sums, idx[s : s + BLOCK], ctx.vectors[ids[s : s + BLOCK]].astype(np.float64))
    counts = np.bincount(idx, minlength=len(keys)).astype(np.float64)
    cent = _norm(sums / counts[:, None])
    dia = np.fromiter((ti for ti, _ in keys), dtype=np.int64, count=len(keys))
    n_t = len(ctx.transcripts)
    k = np.bincount(dia, minlength=n_t).astype(np.float64)
    total = np.zeros((n_t, dim))
    np.add.at(total, dia, cent)
    self_sq = np.bincount(dia, weights=(cent * cent).sum(1), minlength=n_t)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_sim = ((total * total).sum(1) - self_sq) / (k * (k - 1))
    spoke = np.unique(dia)
    ok = spoke[k[spoke] >= 2]
    rows.extend(ok, 1.0 - mean_sim[ok])
    skipped = len(spoke) - len(ok)
    if skipped:
        ctx.note("persona_centroid_distance: dialogue with fewer than two agents", skipped)
    return rows


def _centroid_corpus(ctx: MetricContext) -> Rows:
    rows = Rows()
    for g, (x, labels, _) in sorted(_group_turns(ctx).items()):
        d = _mean_centroid_distance(x, labels)
        if d is None:
            ctx.note("persona_centroid_distance_corpus: corpus with fewer than two agents")
            continue
        rows.add(-(g + 1), d)
    return rows


MAX_FOLDS = 5


def separability(x: np.ndarray, labels: np.ndarray, dialogue_keys: list[str]) -> float | None:
    """Held-out accuracy of a nearest-centroid speaker classifier; see the metric's description."""
    agents = sorted(set(labels.tolist()))
    dialogues = sorted(set(dialogue_keys))
    if len(agents) < 2 or len(dialogues) < 2:
        return None
    k = min(MAX_FOLDS, len(dialogues))
    fold_of = {d: i % k for i, d in enumerate(dialogues)}
    folds = np.array([fold_of[d] for d in dialogue_keys])
    y = np.array([agents.index(a) for a in labels])
    sums = np.zeros((k, len(agents), x.shape[1]))
    counts = np.zeros((k, len(agents)))
    np.add.at(sums, (folds, y), x)
    np.add.at(counts, (folds, y), 1)
    tot_s, tot_c = sums.sum(0), counts.sum(0)
    correct = 0
    for f in range(k):
        train_c = tot_c - counts[f]
        cent = _norm((tot_s - sums[f]) / np.maximum(train_c, 1)[:, None])
        held = folds == f
        sims = x[held] @ cent.T
        sims[:, train_c == 0] = -np.inf  # a speaker unseen in training cannot be predicted
        correct += int((sims.argmax(1) == y[held]).sum())
    return correct / len(y)


def _separability(ctx: MetricContext) -> Rows:
    rows = Rows()
    for g, (x, labels, owners) in sorted(_group_turns(ctx).items()):
        keys = [ctx.transcripts[int(o)].dialogue_id for o in owners]
        acc = separability(x, labels, keys)
        if acc is None:
            ctx.note("persona_separability: corpus with fewer than two agents or two dialogues")
            continue
        rows.add(-(g + 1), acc)
    return rows


register(
    Metric(
        name="persona_similarity",
        unit="turn",
        higher="closer to the persona card",
        fn=_persona_similarity,
        needs_embeddings=True,
        range=(-1.0, 1.0),
        description=(
            "Cosine similarity of MiniLM-L6 embeddings between an agent turn and its persona card text "
            "(PersonaCard.prompt_block()). Plotted per round as persona drift."
        ),
    )
)
register(
    Metric(
        name="persona_card_margin",
        unit="turn",
        higher="more in character",
        fn=_card_margin,
        needs_embeddings=True,
        range=(-2.0, 2.0),
        description=(
            "persona_similarity to the speaker's own card minus the highest similarity to any other card of "
            "the same persona group; > 0 means the turn is closer to its own persona than to the others."
        ),
    )
)
register(
    Metric(
        name="persona_centroid_distance",
        unit="dialogue",
        higher="more distinct personas",
        fn=_centroid_dialogue,
        needs_embeddings=True,
        range=(0.0, 2.0),
        description=(
            "Mean over agent pairs of (1 - cosine) between the agents' centroids in one dialogue; a centroid "
            "is the L2-normalised mean of the agent's turn embeddings (MiniLM-L6). Needs two agents."
        ),
    )
)
register(
    Metric(
        name="persona_centroid_distance_corpus",
        unit="corpus",
        higher="more distinct personas",
        fn=_centroid_corpus,
        needs_embeddings=True,
        range=(0.0, 2.0),
        description="persona_centroid_distance with centroids over all dialogues of one system on one task.",
    )
)
register(
    Metric(
        name="persona_separability",
        unit="corpus",
        higher="more distinct personas",
        fn=_separability,
        needs_embeddings=True,
        range=(0.0, 1.0),
        description=(
            "Held-out accuracy of a nearest-centroid speaker classifier on agent-turn embeddings (MiniLM-L6) "
            "of one system on one task: dialogues (sorted by id) are dealt round-robin into k = min(5, #dialogues) "
            "folds; each fold's turns are classified by the highest cosine to speaker centroids built from the "
            "other folds (a speaker absent from training can never be predicted). Chance is about 1/#agents; "
            "collapse gives values near chance. Needs two agents and two dialogues."
        ),
    )
)
