"""Text helpers for model outputs: reply cleaning and candidate similarity (JSON: :mod:`mascot_eval.jsontext`)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9']+")


def clean_reply(text: str, speaker: str, others: list[str]) -> str:
    """Strip a leading "Name:" label and cut where the model starts writing someone else's turn."""
    t = text.strip()
    names = [speaker, *others, "User", "Assistant"]
    label = re.compile(r"^\s*\**\s*(" + "|".join(re.escape(n) for n in names) + r")\s*\**\s*:\s*", re.IGNORECASE)
    m = label.match(t)
    if m and m.group(1).lower() == speaker.lower():
        t = t[m.end() :]
    cut = re.compile(r"^\s*\**\s*(" + "|".join(re.escape(n) for n in names) + r")\s*\**\s*:", re.IGNORECASE | re.MULTILINE)
    m = cut.search(t)
    if m:
        t = t[: m.start()]
    return t.strip().strip('"').strip()


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def jaccard(a: str, b: str) -> float:
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    return len(wa & wb) / len(wa | wb)


def most_consistent(candidates: list[str]) -> tuple[int, list[float]]:
    """Index of the candidate with the highest mean word-overlap (Jaccard) with the others (the medoid).

    Ties go to the lowest index; empty candidates score -1 so a real reply always wins.
    """
    if not candidates:
        raise ValueError("no candidates")
    scores: list[float] = []
    for i, c in enumerate(candidates):
        if not c.strip():
            scores.append(-1.0)
            continue
        others = [jaccard(c, o) for j, o in enumerate(candidates) if j != i]
        scores.append(sum(others) / len(others) if others else 1.0)
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    return best, scores
