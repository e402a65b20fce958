"""Redundancy of an N-turn block: repeated speaker choices and repeated content (word n-grams).

The group reward of Stage 2 subtracts ``eta * penalty``; penalty = speaker redundancy + content
redundancy, each in 0-1. These mirror the automatic metrics' inter-agent redundancy measures but are
computed per block, cheaply, inside the reward loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9']+")


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    w = _WORD.findall(text.lower())
    if len(w) < n:
        return {tuple(w)} if w else set()
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def containment(a: str, b: str, n: int = 2) -> float:
    """Share of ``a``'s n-grams that also occur in ``b`` (0 when ``a`` has none)."""
    na, nb = ngrams(a, n), ngrams(b, n)
    if not na:
        return 0.0
    return len(na & nb) / len(na)


@dataclass
class Redundancy:
    speaker: float  # share of avoidable repeated speaker choices
    content: float  # mean, over turns after the first, of the max n-gram containment in an earlier turn
    penalty: float  # speaker + content

    def to_dict(self) -> dict[str, float]:
        return {"speaker": self.speaker, "content": self.content, "penalty": self.penalty}


def block_redundancy(block: list[tuple[str, str]], agents: list[str], n: int = 2) -> Redundancy:
    """``block`` = [(speaker, text), ...] agent turns in order; ``agents`` = everyone who could speak.

    A repeat is avoidable while some agent has not spoken yet: with A agents and L turns,
    max(0, L - A) repeats are unavoidable and do not count.
    """
    L = len(block)
    if L <= 1:
        return Redundancy(0.0, 0.0, 0.0)
    speakers = [s for s, _ in block]
    repeats = L - len(set(speakers))
    unavoidable = max(0, L - len(set(agents)))
    speaker = max(0, repeats - unavoidable) / (L - 1)
    overlaps = [max(containment(block[i][1], block[j][1], n) for j in range(i)) for i in range(1, L)]
    content = sum(overlaps) / len(overlaps)
    return Redundancy(speaker, content, speaker + content)
