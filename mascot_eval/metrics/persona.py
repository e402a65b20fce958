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


def _norm(m: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.divide(m, n, out=np.zeros_like(m), where=n > 0)


def _persona_similarity(ctx: MetricContext) -> Rows:
    rows = Rows()
    cards = ctx.card_texts
    vec = ctx.vectors
    missing = 0
    for r in ctx.agent_turns:
        text = cards.get((ctx.transcripts[r.ti].persona_group, r.speaker))
        if text is None:
            missing += 1
            continue
        rows.add(r.ti, float(vec[r.text_id].astype(np.float64) @ ctx.vec_of_text(text).astype(np.float64)),
                 agent=r.speaker, round=r.round)
    if missing:
        ctx.note("persona_similarity: speaker without a persona card", missing)
    return rows


def _card_margin(ctx: MetricContext) -> Rows:
    rows = Rows()
    cards = ctx.card_texts
    vec = ctx.vectors
    by_group: dict[str, dict[str, str]] = {}
    for (g, name), text in cards.items():
        by_group.setdefault(g, {})[name] = text
    missing = 0
    for r in ctx.agent_turns:
        group = by_group.get(ctx.transcripts[r.ti].persona_group, {})
        if r.speaker not in group or len(group) < 2:
            missing += 1
            continue
        e = vec[r.text_id].astype(np.float64)
        own = float(e @ ctx.vec_of_text(group[r.speaker]).astype(np.float64))
        other = max(float(e @ ctx.vec_of_text(t).astype(np.float64)) for n, t in group.items() if n != r.speaker)
        rows.add(r.ti, own - other, agent=r.speaker, round=r.round)
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
            out[g] = (vec[[r.text_id for r in refs]].astype(np.float64),
                      np.array([r.speaker for r in refs], dtype=object),
                      np.array([r.ti for r in refs], dtype=np.int64))
        return out

    return ctx.memo("persona:group_turns", run)


def _centroid_dialogue(ctx: MetricContext) -> Rows:
    rows = Rows()
    skipped = 0
    for g, (x, labels, owners) in sorted(_group_turns(ctx).items()):
        order = np.argsort(owners, kind="stable")
        x, labels, owners = x[order], labels[order], owners[order]
        bounds = np.flatnonzero(np.diff(owners)) + 1
        for idx in np.split(np.arange(len(owners)), bounds):
            d = _mean_centroid_distance(x[idx], labels[idx])
            if d is None:
                skipped += 1
                continue
            rows.add(int(owners[idx[0]]), d)
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


register(Metric(
    name="persona_similarity", unit="turn", higher="closer to the persona card", fn=_persona_similarity,
    needs_embeddings=True, range=(-1.0, 1.0),
    description=(
        "Cosine similarity of MiniLM-L6 embeddings between an agent turn and its persona card text "
        "(PersonaCard.prompt_block()). Plotted per round as persona drift."
    ),
))
register(Metric(
    name="persona_card_margin", unit="turn", higher="more in character", fn=_card_margin,
    needs_embeddings=True, range=(-2.0, 2.0),
    description=(
        "persona_similarity to the speaker's own card minus the highest similarity to any other card of "
        "the same persona group; > 0 means the turn is closer to its own persona than to the others."
    ),
))
register(Metric(
    name="persona_centroid_distance", unit="dialogue", higher="more distinct personas", fn=_centroid_dialogue,
    needs_embeddings=True, range=(0.0, 2.0),
    description=(
        "Mean over agent pairs of (1 - cosine) between the agents' centroids in one dialogue; a centroid "
        "is the L2-normalised mean of the agent's turn embeddings (MiniLM-L6). Needs two agents."
    ),
))
register(Metric(
    name="persona_centroid_distance_corpus", unit="corpus", higher="more distinct personas",
    fn=_centroid_corpus, needs_embeddings=True, range=(0.0, 2.0),
    description="persona_centroid_distance with centroids over all dialogues of one system on one task.",
))
register(Metric(
    name="persona_separability", unit="corpus", higher="more distinct personas", fn=_separability,
    needs_embeddings=True, range=(0.0, 1.0),
    description=(
        "Held-out accuracy of a nearest-centroid speaker classifier on agent-turn embeddings (MiniLM-L6) "
        "of one system on one task: dialogues (sorted by id) are dealt round-robin into k = min(5, #dialogues) "
        "folds; each fold's turns are classified by the highest cosine to speaker centroids built from the "
        "other folds (a speaker absent from training can never be predicted). Chance is about 1/#agents; "
        "collapse gives values near chance. Needs two agents and two dialogues."
    ),
))
