"""Preference pairs: within each state (one point of one rollout, one persona), every two scored
candidates whose aggregates differ by at least delta make a pair (higher = chosen). Pairs are split
into train and held-out by context, so held-out accuracy measures generalisation to unseen situations."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..fileio import stable_hash


@dataclass
class PairStats:
    candidates: int = 0
    scored: int = 0
    unscored: int = 0
    compared: int = 0  # candidate pairs within a (context, persona) group
    kept: int = 0
    below_delta: int = 0
    identical_text: int = 0
    per_persona: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def explain(self, delta: float) -> str:
        return (
            f"{self.kept} pairs kept from {self.candidates} candidates ({self.scored} scored, {self.unscored} unscored by the "
            f"judge); of {self.compared} comparable pairs {self.below_delta} differ by less than delta={delta} and "
            f"{self.identical_text} have identical text"
        )


def build_pairs(judged: list[dict[str, Any]], texts: dict[str, str], delta: float) -> tuple[list[dict[str, Any]], PairStats]:
    """Pairs (chosen, rejected) with ``aggregate(chosen) - aggregate(rejected) >= delta``.

    ``judged`` rows carry key, task, context_id, state, persona, aggregate (None = unscored); ``texts`` maps a
    candidate key to its reply. Deterministic: groups and candidates are visited in sorted order.
    """
    st = PairStats(candidates=len(judged))
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in judged:
        st.per_persona.setdefault(r["persona"], 0)
        if r.get("aggregate") is None:
            st.unscored += 1
            continue
        st.scored += 1
        groups[(r["task"], r["context_id"], r.get("state", ""), r["persona"])].append(r)
    pairs: list[dict[str, Any]] = []
    eps = 1e-9
    for (task, cid, state, persona), rows in sorted(groups.items()):
        rows = sorted(rows, key=lambda r: r["key"])
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                a, b = rows[i], rows[j]
                st.compared += 1
                diff = a["aggregate"] - b["aggregate"]
                if abs(diff) + eps < delta or abs(diff) == 0:
                    st.below_delta += 1
                    continue
                w, lo = (a, b) if diff > 0 else (b, a)
                if texts[w["key"]].strip() == texts[lo["key"]].strip():
                    st.identical_text += 1
                    continue
                pairs.append(
                    {
                        "task": task,
                        "context_id": cid,
                        "state": state,
                        "persona": persona,
                        "chosen_key": w["key"],
                        "rejected_key": lo["key"],
                        "chosen": texts[w["key"]],
                        "rejected": texts[lo["key"]],
                        "chosen_score": w["aggregate"],
                        "rejected_score": lo["aggregate"],
                        "margin": abs(diff),
                    }
                )
                st.per_persona[persona] = st.per_persona.get(persona, 0) + 1
    st.kept = len(pairs)
    return pairs, st


def split_heldout(pairs: list[dict[str, Any]], fraction: float, seed: int = 0) -> list[dict[str, Any]]:
    """Mark each pair ``split: train|heldout``; whole contexts go to held-out (at least one when possible)."""
    ctxs = sorted({f"{p['task']}:{p['context_id']}" for p in pairs}, key=lambda k: stable_hash([seed, k]))
    n_held = 0
    if fraction > 0 and len(ctxs) >= 2:
        n_held = max(1, min(len(ctxs) - 1, round(fraction * len(ctxs))))
    held = set(ctxs[:n_held])
    return [{**p, "split": "heldout" if f"{p['task']}:{p['context_id']}" in held else "train"} for p in pairs]
