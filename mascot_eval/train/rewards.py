"""Reward terms: the speaker format reward, Stage 1's composite reward, the Director's format reward.

All terms are plain functions of text so they are tested directly; :mod:`.stage1` and :mod:`.stage2`
wrap them as trl reward functions and log every component.
"""

from __future__ import annotations

import re
from typing import Any

_LABEL = re.compile(r"^\s*\**\s*([A-Z][A-Za-z ]{0,20})\s*\**\s*:", re.MULTILINE)
_END = re.compile(r"[.!?…)\"'”’]\s*$")


def format_checks(raw: str, name: str, others: list[str], max_words: int) -> dict[str, bool]:
    """The four parts of the format reward for one speaker reply (the raw completion)."""
    words = raw.split()
    labels = {m.group(1).strip().lower() for m in _LABEL.finditer(raw)}
    foreign = {o.lower() for o in others} | {"user", "assistant", "system"}
    return {
        "non_empty": len(words) >= 3,
        "own_voice": not (labels & foreign),  # does not write lines for the user or other agents
        "length_ok": 0 < len(words) <= max_words,
        "complete": bool(_END.search(raw.strip())),  # ends a sentence (not cut off by max tokens)
    }


def format_reward(raw: str, name: str, others: list[str], max_words: int = 120) -> float:
    """Share of the format checks passed, 0-1; an empty reply gets 0."""
    checks = format_checks(raw, name, others, max_words)
    if not checks["non_empty"]:
        return 0.0
    return sum(checks.values()) / len(checks)


def composite_reward(rm_score: float, fmt: float, *, rm_weight: float = 1.0, format_weight: float = 0.5) -> float:
    """Stage 1 reward: rm_weight * reward-model score + format_weight * format reward."""
    return rm_weight * rm_score + format_weight * fmt


def directive_format_reward(reason: str | None, tidy: bool) -> float:
    """1 for a valid directive (0.75 with prose around it), 0.5 for JSON that is not a valid directive, 0 without
    JSON. ``reason`` is the evaluation Director parser's (``systems.director.parse_directive``) verdict."""
    if reason is None:
        return 1.0 if tidy else 0.75
    return 0.0 if reason == "no_json" else 0.5


def completion_text(completion: Any) -> str:
    """trl passes conversational completions as ``[{"role": "assistant", "content": ...}]``, standard ones as text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)
